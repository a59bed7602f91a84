@area:sessions
Feature: Sessions and their configuration
  A session is one agent bound to a project. It starts in Agent mode, can be switched to
  Plan, and is configured only while it is idle (§1, §5).

  Background:
    Given a connected client

  Rule: Agent is the default mode and Plan is the only other one (§1)

    @R1.2
    Scenario: A new session starts in Agent mode
      When the user creates a session for the project
      Then the session is in Agent mode
      And the session is bound to the project
      And the session is idle
      And the session is stored in the database

    @R1.1
    Scenario: A session can be created in Plan mode
      When the user creates a session for the project in Plan mode
      Then the session is in Plan mode

    @R1.1
    Scenario: An idle session switches to Plan mode
      Given a session for the project
      When the user switches the session to Plan mode
      Then the session is in Plan mode

    @R1.1
    Scenario: An idle session switches back to Agent mode
      Given a session for the project in Plan mode
      When the user switches the session to Agent mode
      Then the session is in Agent mode

  Rule: An idle session accepts configuration changes (§5)

    @R5.6
    Scenario: Permission mode and model change while idle
      Given a session for the project
      When the user sets the session's permission mode to accept-edits
      And the user selects the model "other-model" for the session
      Then the session's permission mode is accept-edits
      And the session uses the model "other-model"

    @R5.6
    Scenario: An unknown shell is refused
      Given a session for the project
      When the user selects a shell called "no-such-shell" for the session
      Then the request is refused with SHELL_NOT_FOUND

  Rule: A session is bound to a valid project root or to none (§2)

    @R2.8
    Scenario: A session without a project
      When the user creates a session without a project
      Then the session has no project

    @R2.8
    Scenario: A relative workspace path is refused
      When the user tries to create a session for a relative workspace path
      Then the request is refused with WORKSPACE_INVALID
      And no session was created

    @R2.8
    Scenario: A workspace that does not exist is refused
      When the user tries to create a session for a workspace that does not exist
      Then the request is refused with WORKSPACE_INVALID
      And no session was created

    @R2.8
    Scenario: A workspace that is a file is refused
      When the user tries to create a session for a workspace that is a file
      Then the request is refused with WORKSPACE_INVALID
      And no session was created
