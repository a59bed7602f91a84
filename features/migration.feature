@area:migration
Feature: Upgrading storage from v8 to v10
  A host that finds a v8 database migrates it to v10 before it serves anything, in one
  transaction that writes the new version number last. Sessions, transcript and settings
  come through untouched; a migration that cannot finish leaves the file as it was (§7).

  Rule: A v8 database is migrated to v10 with its data intact (§7)

    @R7.4 @R7.7
    Scenario: A v8 database is upgraded and its data survives
      Given a data directory with a v8 database of 3 sessions and their transcripts
      When the host starts on that data directory
      Then the database is at schema version 10
      And the sessions, transcript, settings and scheduled tasks survived exactly
      And the migrated sessions can be read through the protocol

    @R7.5 @R7.9
    Scenario: The migrated schema is exactly the published v10 schema
      Given a data directory with a v8 database of 1 sessions and their transcripts
      When the host starts on that data directory
      Then the database schema is exactly the published v10 schema

    @R4.10 @R7.5
    Scenario: Earlier approvals are kept and a pending one is interrupted
      Given a data directory with a v8 database of 2 sessions and their transcripts
      When the host starts on that data directory
      Then the earlier plan approvals are kept, a pending one as interrupted

  Rule: A migration that cannot finish changes nothing (§7)

    @R7.8 @R7.9
    Scenario: A conflicting object makes the migration fail without a trace
      Given a data directory with a v8 database of 2 sessions and their transcripts
      And the v8 database already holds a table named "command_audit"
      When the host starts on that data directory
      Then the host refuses to start with MIGRATION_FAILED
      And the database is at schema version 8
      And the database file is exactly as it was

  Rule: Versions the host does not know are refused and left alone (§7)

    @R7.4
    Scenario Outline: An unsupported schema version is refused (<version>)
      Given a data directory with a database at schema version <version>
      When the host starts on that data directory
      Then the host refuses to start with STORAGE_SCHEMA_UNSUPPORTED
      And the database file is exactly as it was

      Examples:
        | version |
        | 7       |
        | 9       |
        | 11      |
