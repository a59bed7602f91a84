@area:artifact_integrity
Feature: Immutable host-written plan artifacts
  Every accepted submission becomes a new Markdown file that the host writes under the
  project's .pi/plan folder, byte for byte as submitted, and records with its hash and size
  in the approval. When anything about the location is doubtful, nothing is created (§2).

  Background:
    Given a connected client

  Rule: The artifact holds the submitted bytes unchanged (§2)

    @R2.1 @R2.7
    Scenario Outline: Markdown is stored byte for byte (<sample>)
      Given a session for the project in Plan mode
      And the model will submit a plan whose markdown has <sample>
      When the user asks for a plan
      Then the plan artifact holds exactly the submitted markdown
      And the approval records the artifact's path, SHA-256 and size

      Examples:
        | sample                     |
        | CRLF line endings          |
        | lone CR line endings       |
        | mixed line endings         |
        | byte order mark            |
        | NUL character              |
        | characters outside the BMP |
        | trailing spaces            |
        | no final newline           |
        | empty                      |
        | 1 MiB                      |

    @R2.6 @R2.7
    Scenario: Title and question stay out of the file
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Rename the module" asking "Is the new name fine?" with this markdown:
        """
        1. Rename the module.
        2. Update the imports.
        """
      When the user asks for a plan
      Then the artifact carries neither the title nor the question
      And the title and question are stored as fields of the approval record

  Rule: The host owns the artifact's folder and name (§2)

    @R2.2 @R2.3
    Scenario: The artifact is a new markdown file in the plan folder
      Given a session for the project in Plan mode
      And the model will submit a plan titled "../../escape attempt"
      When the user asks for a plan
      Then the artifact lives in the project's plan folder with a markdown name
      And the plan artifact holds exactly the submitted markdown

  Rule: Each submission gets its own file and never replaces an earlier one (§2)

    @R2.4 @R2.5
    Scenario: Two identical submissions get two files
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Same plan"
      And the user asks for a plan
      And the user rejects the plan
      And the model will submit a plan titled "Same plan"
      When the user asks for another plan
      Then each submission has its own artifact

    @R2.5 @R2.9
    Scenario: Files already in the plan folder are left alone
      Given the project's plan folder already holds 3 earlier artifacts
      And a session for the project in Plan mode
      And the model will submit a plan titled "A new plan"
      When the user asks for a plan
      Then the earlier artifacts are unchanged
      And the session has 4 artifacts in its plan folder

  Rule: The approval records the artifact's path, hash and size (§2, Consequences)

    @R2.11 @C1
    Scenario: The recorded hash and size match the file
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Verifiable"
      When the user asks for a plan
      Then the approval records the artifact's path, SHA-256 and size

    @R3.2
    Scenario: Opening the artifact returns the file's exact bytes
      Given a session for the project in Plan mode
      And the model will submit a plan whose markdown has CRLF line endings
      And the user asks for a plan
      When the user opens the plan artifact
      Then opening the artifact returns its exact bytes

  Rule: Artifacts are immutable and stay in place (Consequences)

    @C10
    Scenario: The artifact is read-only on disk
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Frozen"
      When the user asks for a plan
      Then the artifact file is read-only

    @C10
    Scenario Outline: The agent cannot change an artifact while executing the plan (<change>)
      Given a plan titled "Keep me" is awaiting approval
      And the model will try to <change> the plan artifact
      When the user approves the plan with permission mode auto
      Then the execution ends
      And the <tool> call was denied with TOOL_DENIED
      And the plan artifact holds exactly the submitted markdown

      Examples:
        | change | tool  |
        | write  | Write |
        | edit   | Edit  |

    @C9
    Scenario: A rejected plan keeps its artifact
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Kept"
      And the user asks for a plan
      When the user rejects the plan
      Then the plan artifact holds exactly the submitted markdown

  Rule: A doubtful location or a failed write creates nothing (§2)

    @R2.12
    Scenario Outline: No artifact and no approval when the plan folder is unsafe (<arrangement>)
      Given <arrangement>
      And a session for the project in Plan mode
      And the model will submit a plan titled "Unsafe"
      When the user asks for a plan
      Then the SubmitPlan call was refused with PLAN_PATH_UNSAFE
      And no approval exists

      Examples:
        | arrangement                                                        |
        | the project's .pi folder is a symlink to a folder outside the project  |
        | the project's plan folder is a symlink to a folder outside the project |
        | the project's plan folder is a regular file                        |
        | the project's .pi folder is a regular file                         |

    @R2.12
    Scenario: A symlinked .pi folder is not followed
      Given the project's .pi folder is a symlink to a folder outside the project
      And a session for the project in Plan mode
      And the model will submit a plan titled "Outside"
      When the user asks for a plan
      Then the folder outside the project is still empty

    @R2.8 @R2.12
    Scenario: A project folder that disappeared is refused
      Given a session for the project in Plan mode
      And the project folder has been deleted
      And the model will submit a plan titled "Gone"
      When the user asks for a plan
      Then the SubmitPlan call was refused with WORKSPACE_INVALID
      And no approval exists

    @R2.12
    Scenario: A failed write creates no approval
      Given a session for the project in Plan mode
      And the host will fail to write the next artifact
      And the model will submit a plan titled "Write fails"
      When the user asks for a plan
      Then the SubmitPlan call was refused with ARTIFACT_WRITE_FAILED
      And no approval exists
      And the session has 0 artifacts in its plan folder

    @R2.10 @R2.12
    Scenario: A failed flush creates no approval
      Given a session for the project in Plan mode
      And the host will fail to flush the next artifact
      And the model will submit a plan titled "Flush fails"
      When the user asks for a plan
      Then the SubmitPlan call was refused with ARTIFACT_WRITE_FAILED
      And no approval exists
