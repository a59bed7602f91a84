@area:isolation
Feature: Sessions are isolated from each other
  Each session works in its own project and hears only its own events (§5).

  Background:
    Given a connected client
    And a session for the project
    And a second session for another project with a file "secret.txt"

  Rule: One session cannot reach another session's project (§5)

    @R5.8
    Scenario: Reading another project's file is refused
      Given the model will read "secret.txt" from the other project
      And the model will answer "I cannot read it."
      When the user sends a prompt
      Then the Read call was refused with PATH_OUTSIDE_WORKSPACE

  Rule: Events and approvals belong to their own session (§5)

    @R5.9
    Scenario: Turn notifications name their own session
      Given the model will answer "Hello from the first session."
      When the user sends a prompt
      Then every notification about a turn names the session that owns it

    @R5.9
    Scenario: A plan cannot be approved through another session
      Given a plan titled "Mine" is awaiting approval
      When the user approves the plan through the second session
      Then the request is refused with APPROVAL_NOT_FOUND
      And the approval is pending
