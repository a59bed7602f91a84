@area:artifact_integrity
Feature: Immutable host-written plan artifacts
  Every accepted submission becomes a new Markdown file that the host writes under the
  project's .pi/plan folder, byte for byte as submitted, and records with its hash and size
  in the approval. When anything about the location is doubtful, nothing is created (§2).
  The files stay as written: the agent cannot write into the plan folder, and a plan whose
  file changed on disk cannot be approved (Consequences, project rules P12 and P13).

  Background:
    Given a connected client

  Rule: The artifact holds the submitted bytes unchanged (§2)

    @R2.1
    Scenario: A project reached through a link takes its plan like any other
      Given a session in Plan mode for the project reached through a link
      And the model will submit a plan whose markdown has decomposed accents
      When the user asks for a plan
      Then the plan artifact holds exactly the submitted markdown
      And the approval records the artifact's path, SHA-256 and size

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
        | decomposed accents         |
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

    @R2.6 @R4.3
    Scenario Outline: Title and question are kept exactly as submitted (<text>)
      Given a session for the project in Plan mode
      And the model will submit a plan whose title and question have <text>
      When the user asks for a plan
      Then the title and question are stored as fields of the approval record
      And the title and question are reported exactly as submitted

      Examples:
        | text                       |
        | surrounding spaces         |
        | line breaks                |
        | tabs and runs of spaces    |
        | characters outside the BMP |
        | decomposed accents         |
        | nothing at all             |
        | quotes and signs           |
        | hundreds of characters     |
        | a hundred characters of another script |

  Rule: The host owns the artifact's folder and name (§2)

    @R2.2
    Scenario: The artifact is a new markdown file in the plan folder
      Given a session for the project in Plan mode
      And the model will submit a plan titled "A plain plan"
      When the user asks for a plan
      Then the artifact lives in the project's plan folder with a markdown name

    @R2.3
    Scenario Outline: A title that looks like a path does not move the artifact (<title>)
      Given a session for the project in Plan mode
      And the model will submit a plan titled "<title>"
      When the user asks for a plan
      Then nothing was written outside the project's plan folder
      And the plan artifact holds exactly the submitted markdown

      Examples:
        | title                |
        | ../../escape attempt |
        | /tmp/absolute plan   |
        | nested/folder/plan   |
        | .pi/plan/chosen.md   |

  Rule: Each submission gets its own file and never replaces an earlier one (§2)

    @R2.4 @R2.5 @R2.9
    Scenario: Two identical submissions at the same moment get two files
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Same plan"
      And the user asks for a plan
      And the user rejected the plan
      And the model will submit a plan titled "Same plan"
      When the user asks for another plan
      Then each submission has its own artifact

    @R2.4 @R2.5 @R2.9
    Scenario: A third identical submission gets a third file
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Same plan"
      And the user asks for a plan
      And the user rejected the plan
      And the model will submit a plan titled "Same plan"
      And the user asked for another plan
      And the user rejected the plan
      And the model will submit a plan titled "Same plan"
      When the user asks for another plan
      Then each submission has its own artifact

    @R2.4 @R2.5 @R2.9
    Scenario: Two sessions of one project submitting at the same moment get two files
      Given a session for the project in Plan mode
      And another session for the same project has a plan titled "Same plan" awaiting approval
      And the model will submit a plan titled "Same plan"
      When the user asks for a plan
      Then the two sessions' plans have artifacts of their own

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

  Rule: Opening a plan returns the artifact's exact bytes (§3)

    @R3.2
    Scenario: After a revision, opening the earlier plan returns the earlier plan's bytes
      Given a session for the project in Plan mode
      And the model will submit a plan titled "First idea"
      And the user asks for a plan
      And the user rejected the plan
      And the model will submit a plan titled "Second idea"
      And the user asked for another plan
      When the user opens the artifact of the plan titled "First idea"
      Then opening it returns the bytes the plan titled "First idea" was submitted with

    @R3.2 @C1
    Scenario Outline: Opening the artifact returns the file's exact bytes (<sample>)
      Given a session for the project in Plan mode
      And the model will submit a plan whose markdown has <sample>
      And the user asks for a plan
      When the user opens the plan artifact
      Then opening the artifact returns its exact bytes

      Examples:
        | sample            |
        | CRLF line endings |
        | NUL character     |
        | byte order mark   |
        | empty             |

  Rule: Artifacts stay in place, as written, whatever happens to the plan (Consequences)

    @C9 @C10
    Scenario Outline: The artifact stays as written after <ending>
      Given a plan titled "Keep me" is awaiting approval
      When <ending>
      Then the plan artifact is still there, byte for byte as submitted

      Examples:
        | ending                                          |
        | the user rejects the plan                       |
        | the plan's time runs out                        |
        | the plan is approved and carried out            |
        | the host is restarted while the plan awaits approval |
        | the user rejects the plan, and the host is restarted |
        | the plan's time runs out, and the host is restarted  |

    @C10
    Scenario Outline: The agent cannot change an artifact while executing the plan (<change>)
      Given a plan titled "Keep me" is awaiting approval
      And the model will try to <change> the plan artifact
      When the user approves the plan with permission mode auto
      And the approved plan has been carried out
      Then the <tool> call was refused with TOOL_DENIED
      And the plan artifact holds exactly the submitted markdown

      Examples:
        | change | tool  |
        | write  | Write |
        | edit   | Edit  |

  Rule: The plan folder is the host's alone, in every mode (project rule P12)

    @P12
    Scenario Outline: The agent cannot write into the plan folder (<attempt>, <permission>)
      Given a plan titled "Keep me" was submitted and rejected
      And the session was switched to Agent mode with permission mode <permission>
      And the project has a folder "docs" that leads into its plan folder
      And the model will <attempt> and then answer
      When the user sends a prompt
      Then the <tool> call was refused with TOOL_DENIED
      And the plan folder holds only the artifact, unchanged

      Examples:
        | attempt                                            | tool  | permission   |
        | overwrite the plan artifact                        | Write | auto         |
        | edit the plan artifact                             | Edit  | accept-edits |
        | write a new file into the plan folder              | Write | auto         |
        | write into the plan folder by a roundabout path    | Write | accept-edits |
        | write into the plan folder through a linked folder | Write | auto         |

    @P12
    Scenario: The plan folder of a project reached through a link is guarded too
      Given a session in Plan mode for the project reached through a link
      And a plan titled "Keep me" was submitted and rejected
      And the session was switched to Agent mode with permission mode auto
      And the model will write a new file into the plan folder and then answer
      When the user sends a prompt
      Then the Write call was refused with TOOL_DENIED
      And the plan folder holds only the artifact, unchanged

  Rule: A plan whose file changed on disk cannot be approved or opened (project rule P13)

    @P13
    Scenario Outline: A plan file <change> on disk after submission is not approved
      Given a plan titled "Checked at approval" is awaiting approval
      And the plan file is <change> on disk after submission
      When the user tries to approve the plan with permission mode auto
      Then approving is refused with <code>
      And the plan still awaits approval and the session is unchanged
      And opening the plan is refused with <code>
      And after rejecting the plan the user can start a new turn

      Examples:
        | change                                 | code                |
        | changed                                | ARTIFACT_MODIFIED   |
        | changed in its last byte               | ARTIFACT_MODIFIED   |
        | extended                               | ARTIFACT_MODIFIED   |
        | replaced by bytes that are not UTF-8   | ARTIFACT_MODIFIED   |
        | deleted                                | ARTIFACT_UNREADABLE |
        | replaced by a folder                   | ARTIFACT_UNREADABLE |
        | replaced by a link to a copy of itself | ARTIFACT_UNREADABLE |

    @P13
    Scenario Outline: A revision whose file was <change> is not approved on the strength of an identical earlier plan
      Given a plan titled "Twice" is awaiting approval
      And the user rejected the plan
      And the model will submit a plan titled "Twice"
      And the user asked for another plan
      And the revised plan titled "Twice" is the one awaiting approval
      And the plan file is <change> on disk after submission
      When the user tries to approve the plan with permission mode auto
      Then approving is refused with <code>
      And opening the plan is refused with <code>

      Examples:
        | change  | code                |
        | changed | ARTIFACT_MODIFIED   |
        | deleted | ARTIFACT_UNREADABLE |

    @P13 @R3.11
    Scenario: A plan whose approval was refused still expires at its deadline
      Given a plan titled "Checked at approval" is awaiting approval
      And the plan file is changed on disk after submission
      And the user tried to approve the plan with permission mode auto
      Then the plan still expires at its original deadline

    @P13
    Scenario: A plan file put back as it was can be approved
      Given a plan titled "Checked at approval" is awaiting approval
      And the plan file is changed on disk after submission
      And the user tried to approve the plan with permission mode auto
      And the model will answer "Carried out."
      When the plan file is put back as it was
      And the user tries to approve the plan with permission mode auto
      Then the approval goes ahead and the plan is carried out

    @P13
    Scenario: A plan file saved again as a new file with the same bytes can be approved
      Given a plan titled "Checked at approval" is awaiting approval
      And the model will answer "Carried out."
      When the plan file is saved again as a new file holding the same bytes
      And the user tries to approve the plan with permission mode auto
      Then the approval goes ahead and the plan is carried out

    @P13
    Scenario: A plan opened before its file changed is not approved
      Given a plan titled "Checked at approval" is awaiting approval
      And the user opened the plan artifact
      And the plan file is changed on disk after submission
      When the user tries to approve the plan with permission mode auto
      Then approving is refused with ARTIFACT_MODIFIED
      And the plan still awaits approval and the session is unchanged

    @P13
    Scenario Outline: A plan opened before its file changed is refused when opened again (<change>)
      Given a plan titled "Checked at approval" is awaiting approval
      And the user opened the plan artifact
      When the plan file is <change> on disk after submission
      Then opening the plan is refused with ARTIFACT_MODIFIED

      Examples:
        | change                                          |
        | changed                                         |
        | changed keeping its size and modification time  |

    @P13
    Scenario: A large plan file changed in its last byte is not approved
      Given a session for the project in Plan mode
      And the model will submit a plan whose markdown has 1 MiB
      And the user asks for a plan
      And the plan file is changed in its last byte on disk after submission
      When the user tries to approve the plan with permission mode auto
      Then approving is refused with ARTIFACT_MODIFIED
      And opening the plan is refused with ARTIFACT_MODIFIED

  Rule: A doubtful location or a failed write creates nothing (§2)

    @R2.12
    Scenario Outline: No artifact and no approval when the plan folder is unsafe (<arrangement>)
      Given <arrangement>
      And a session for the project in Plan mode
      And the model will try to submit a plan titled "Unsafe"
      When the user asks for a plan
      Then the SubmitPlan call was refused with PLAN_PATH_UNSAFE
      And no approval exists

      Examples:
        | arrangement                                                            |
        | the project's .pi folder is a symlink to a folder outside the project  |
        | the project's plan folder is a symlink to a folder outside the project |
        | the project's plan folder is a regular file                            |
        | the project's .pi folder is a regular file                             |

    @R2.12
    Scenario: A symlinked .pi folder is not followed
      Given the project's .pi folder is a symlink to a folder outside the project
      And a session for the project in Plan mode
      And the model will try to submit a plan titled "Outside"
      When the user asks for a plan
      Then the folder outside the project is still empty

    @R2.8 @R2.12
    Scenario: A project folder that disappeared is refused
      Given a session for the project in Plan mode
      And the project folder has been deleted
      And the model will try to submit a plan titled "Gone"
      When the user asks for a plan
      Then the SubmitPlan call was refused with WORKSPACE_INVALID
      And no approval exists

    @R2.12
    Scenario: A project folder that cannot be written to gets no approval
      Given a session for the project in Plan mode
      And the project folder cannot be written to
      And the model will try to submit a plan titled "Read-only"
      When the user asks for a plan
      Then the SubmitPlan call was refused with ARTIFACT_WRITE_FAILED
      And no approval exists

    @R2.12
    Scenario: A failed write creates no approval
      Given a session for the project in Plan mode
      And writing the next plan file will fail
      And the model will try to submit a plan titled "Write fails"
      When the user asks for a plan
      Then the SubmitPlan call was refused with ARTIFACT_WRITE_FAILED
      And no approval exists

    @R2.12
    Scenario: A write failure armed again after it fired fails the next plan file again
      Given a session for the project in Plan mode
      And writing the next plan file will fail
      And the model will try to submit a plan titled "First try"
      And the user asked for a plan
      And writing the next plan file will fail
      And the model will try to submit a plan titled "Second try"
      When the user asks for another plan
      Then the SubmitPlan call was refused with ARTIFACT_WRITE_FAILED

    @R2.12
    Scenario: A write failure that happened before a restart does not happen again after it
      Given a session for the project in Plan mode
      And writing the next plan file will fail
      And the model will try to submit a plan titled "Before the restart"
      And the user asked for a plan
      And the host restarted
      And the model will try to submit a plan titled "After the restart"
      When the user asks for another plan
      Then the plan titled "After the restart" submitted after the restart awaits approval

    @R2.10 @R2.12
    Scenario Outline: The model submits the plan again after <action> its file failed, and it awaits approval
      Given a session for the project in Plan mode
      And <action> the next plan file will fail
      And the model will try to submit a plan titled "Try again", and submit it again once that failed
      When the user asks for a plan
      Then the second submission of "Try again" awaits approval

      Examples:
        | action   |
        | writing  |
        | flushing |

    @R2.10 @R2.12
    Scenario: A failed flush creates no approval
      Given a session for the project in Plan mode
      And flushing the next plan file will fail
      And the model will try to submit a plan titled "Flush fails"
      When the user asks for a plan
      Then the SubmitPlan call was refused with ARTIFACT_WRITE_FAILED
      And no approval exists
