@area:execution
Feature: Executing an approved plan
  Approval hands the plan to the same agent, now in Agent mode with the chosen permission
  mode. The execution is queued, runs, and completes, and the permission mode governs which
  tool calls ask the user first (§3, §4).

  Background:
    Given a connected client
    And a plan titled "Write the notes" is awaiting approval

  Rule: The same agent runs the approved plan: queued, running, completed (§4)

    @R4.5 @R4.7
    Scenario: An approved plan runs to completion
      Given the model will answer "The plan is carried out."
      When the user approves the plan with permission mode auto
      Then the same agent runs the approved plan
      And the execution runs to completion
      And the session is in Agent mode with permission mode auto

  Rule: The selected permission mode decides what asks first (§3, project rule P7)

    @P7
    Scenario: With ask, a file change waits for the user's permission
      Given the model will call Write on "notes.txt"
      When the user approves the plan with permission mode ask
      Then the host asks permission before Write
      When the user allows it
      Then the execution ends
      And the project file "notes.txt" contains "written by the model"

    @P7
    Scenario: With ask, a denied file change changes nothing
      Given the model will call Write on "notes.txt"
      When the user approves the plan with permission mode ask
      Then the host asks permission before Write
      When the user denies it
      Then the execution ends
      And the project has no file "notes.txt"

    @P7
    Scenario: With accept-edits, file changes run without asking
      Given the model will call Write on "notes.txt"
      When the user approves the plan with permission mode accept-edits
      Then the execution ends
      And no permission was asked
      And the project file "notes.txt" contains "written by the model"

    @P7
    Scenario: With accept-edits, commands still ask
      Given the model will run the command "echo ran > ran.txt"
      When the user approves the plan with permission mode accept-edits
      Then the host asks permission before Bash
      When the user allows it
      Then the execution ends
      And the project file "ran.txt" contains "ran"

    @P7
    Scenario: With auto, nothing asks
      Given the model will run the command "echo ran > ran.txt"
      When the user approves the plan with permission mode auto
      Then the execution ends
      And no permission was asked
      And the project file "ran.txt" contains "ran"
