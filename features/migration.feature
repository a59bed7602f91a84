@area:migration
Feature: Upgrading storage from v8 to v10, and refusing what cannot be served
  A host that finds a v8 database migrates it to v10 before it serves anything, in one
  transaction that writes the new version number last. Sessions, transcript and settings
  come through untouched, and the approvals of the old Plan contract are kept as legacy
  records; a migration that cannot finish leaves the file as it was (§7).

  A host that cannot serve a data directory says so in one error line and exits, leaving
  everything as it found it (project rules P16 and P18).

  Rule: A v8 database is migrated to v10 with its data intact (§7)

    @R7.4 @R7.7
    Scenario: A v8 database is upgraded and its data survives
      Given a data directory with a v8 database of 3 sessions and their transcripts
      When the host starts on that data directory
      Then the database is at schema version 10
      And the sessions, transcript, settings and scheduled tasks survived exactly
      And the migrated sessions and their transcripts can be read through the protocol

    @R7.5 @R7.9
    Scenario: The migrated database has the published v10 structure
      Given a data directory with a v8 database of 1 sessions and their transcripts
      When the host starts on that data directory
      Then the database is at schema version 10
      And the database has the structure of the published v10 schema
      And the database file is in write-ahead-log mode

    @R7.7 @R1.3
    Scenario: A migrated conversation goes on where it left off
      Given a data directory with a v8 database of a conversation and a task for the project
      When the host starts on that data directory
      And the user continues the migrated conversation
      Then the model was shown the migrated conversation

    @R7.7 @P29
    Scenario: A migrated scheduled task runs when its time comes
      Given a data directory with a v8 database of a conversation and a task for the project
      And the model will answer "The changelog is tidy." for the task
      When the host starts on that data directory
      And the time the task was due comes
      Then the migrated task ran when its time came

  Rule: The approvals of the old Plan contract are kept as legacy records (§4, §7, project rule P16)

    @R4.10 @P16 @R7.2
    Scenario: Earlier approvals are kept and a pending one is interrupted
      Given a data directory with a v8 database of 2 sessions and their transcripts
      When the host starts on that data directory
      Then the earlier plan approvals are kept, a pending one as interrupted
      And the host lists them oldest first

    @P16
    Scenario Outline: A v8 approval that was <v8 status> is listed as <v10 status>
      Given a data directory with a v8 database holding an approval that was <v8 status>
      When the host starts on that data directory
      Then the host lists that approval as <v10 status>, with no turn and no artifact
      And its title comes from the v8 proposal and its question is empty
      And its stored record keeps the v8 proposal and its feedback

      Examples:
        | v8 status                      | v10 status  |
        | pending                        | interrupted |
        | approved                       | approved    |
        | rejected                       | rejected    |
        | changes_requested              | rejected    |
        | rejected with no decision time | rejected    |

  Rule: A migration that cannot finish changes nothing (§7)

    @R7.8 @R7.9 @P18
    Scenario: A migration that fails is rolled back and the host refuses to start
      Given a data directory with a v8 database of 2 sessions and their transcripts
      And the v8 database already holds a table named "command_audit"
      When the host starts on that data directory
      Then the host refuses to start with MIGRATION_FAILED
      And the host said so in one error line and exited with a failure status
      And the database is at schema version 8
      And the data directory is exactly as it was

  Rule: Versions the host does not know are refused and left alone (§7)

    @R7.4 @P18
    Scenario Outline: A database <age> is refused and left alone
      Given a data directory with a database <age>
      When the host starts on that data directory
      Then the host refuses to start with STORAGE_SCHEMA_UNSUPPORTED
      And the host said so in one error line and exited with a failure status
      And the data directory is exactly as it was

      Examples:
        | age                     |
        | older than v8           |
        | between v8 and v10      |
        | newer than v10          |
        | left by another program |

  Rule: A data directory the host cannot use is refused and left alone (project rule P18)

    @P18
    Scenario Outline: A database that is <what> is refused and left alone
      Given a data directory whose database is <what>
      When the host starts on that data directory
      Then the host refuses to start with STORAGE_UNAVAILABLE
      And the host said so in one error line and exited with a failure status
      And the data directory is exactly as it was

      Examples:
        | what                           |
        | a folder                       |
        | a text file                    |
        | a link to a database elsewhere |

    @P18
    Scenario: A data directory that is a file is refused and left alone
      Given a data directory that is a file
      When the host starts on that data directory
      Then the host refuses to start with STORAGE_UNAVAILABLE
      And the host said so in one error line and exited with a failure status
      And the data directory is exactly as it was
