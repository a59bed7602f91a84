@area:scheduled_plan
Feature: Scheduled tasks never plan unattended
  Nobody is there to approve a plan when a scheduled task runs, so a task in Plan mode is
  refused before the host does any work for it. Only a task explicitly changed to Agent
  runs unattended (§6).

  Unattended runs follow one more rule of this project: a tool call that would need a
  permission answer is refused with PERMISSION_UNAVAILABLE, and the run goes on.

  Background:
    Given a connected client

  Rule: A Plan task is refused before provider work, artifact, approval or queue entry (§6)

    @R6.1 @R6.2
    Scenario: Running a Plan task now is refused
      Given a scheduled task in Plan mode for the project
      And the model will submit a plan titled "Should never exist"
      When the task is run now
      Then the run is refused with PLAN_REQUIRES_INTERACTIVE_SESSION
      And the model received no request
      And no plan artifact was written
      And no approval, execution or turn was recorded
      And the task's last run is recorded as refused

    @R6.1 @R6.2 @R3.8
    Scenario: A Plan task whose time comes is refused
      Given a scheduled task in Plan mode for the project
      And the task is due in 5 minutes
      And the model will submit a plan titled "Should never exist"
      When 5 minutes pass on the host clock
      Then the run is refused with PLAN_REQUIRES_INTERACTIVE_SESSION
      And the model received no request
      And no plan artifact was written
      And no approval, execution or turn was recorded

  Rule: Only an explicit change to Agent lets a task run unattended (§6)

    @R6.3
    Scenario: The host never switches a refused task to Agent by itself
      Given a scheduled task in Plan mode for the project
      When the task is run now
      Then the run is refused with PLAN_REQUIRES_INTERACTIVE_SESSION
      And the task is still in Plan mode

    @R6.3
    Scenario: A task changed to Agent runs unattended
      Given a scheduled task in Plan mode for the project
      And the user changed the task to Agent mode
      When the task is run now
      Then the run completes unattended
      And no plan artifact was written

    @R6.3
    Scenario: An Agent task runs when its time comes
      Given a scheduled task in Agent mode for the project
      And the task is due in 10 minutes
      When 10 minutes pass on the host clock
      Then the run completes unattended

  Rule: Unattended runs cannot wait for a permission answer (§6, project rule P8)

    @P8
    Scenario: A tool call that needs permission is refused in an unattended run
      Given a scheduled task in Agent mode for the project with permission mode ask
      And the model will call Write on "notes.txt"
      When the task is run now
      Then the Write call was refused with PERMISSION_UNAVAILABLE
      And the run completes unattended
      And the project has no file "notes.txt"
