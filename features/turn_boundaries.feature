@area:turn_boundaries
Feature: One active turn, configuration only while idle
  A session does one thing at a time. While a turn runs, a second prompt and any change of
  mode, provider, model or permission mode are refused; while a plan awaits approval, only
  approve and reject are accepted (§5).

  Background:
    Given a connected client

  Rule: One active turn per session (§5)

    @R5.1
    Scenario: A second prompt during a turn is refused
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      When the user tries to send another prompt
      Then the request is refused with SESSION_BUSY
      And the turn is still running

    @R5.5
    Scenario: A second Plan run during a Plan turn is refused
      Given a session for the project in Plan mode
      And the model takes its time to answer
      And the user started a turn
      When the user tries to send another prompt
      Then the request is refused with SESSION_BUSY

  Rule: Configuration changes only while idle (§5)

    @R5.3 @R5.6
    Scenario: Switching mode during a turn is refused
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      When the user tries to switch the session to Plan mode
      Then the request is refused with SESSION_BUSY
      And the session is in Agent mode

    @R5.3 @R5.6
    Scenario Outline: Changing the configuration during a turn is refused (<setting>)
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      When the user tries to change the <setting>
      Then the request is refused with SESSION_BUSY

      Examples:
        | setting         |
        | permission mode |
        | model           |
        | provider        |

    @R5.4
    Scenario: Changing the shell during a turn is refused
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      When the user tries to change the shell
      Then the request is refused with SESSION_BUSY

  Rule: While a plan awaits approval only approve and reject are accepted (§5)

    @R5.7
    Scenario: A prompt while a plan is pending is refused
      Given a plan titled "Pending" is awaiting approval
      When the user tries to send another prompt
      Then the request is refused with APPROVAL_PENDING
      And the approval is pending

    @R5.7
    Scenario: Switching mode while a plan is pending is refused
      Given a plan titled "Pending" is awaiting approval
      When the user tries to switch the session to Agent mode
      Then the request is refused with APPROVAL_PENDING
      And the session is in Plan mode

    @R5.7
    Scenario: Cancelling while a plan is pending is refused
      Given a plan titled "Pending" is awaiting approval
      When the user tries to cancel
      Then the request is refused with APPROVAL_PENDING
      And the approval is pending

  Rule: An active turn can be cancelled (§5)

    @R5.1
    Scenario: Cancelling a turn ends it and frees the session
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      When the user cancels the turn
      Then the turn ended as cancelled
      And the session is idle
