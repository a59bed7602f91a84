@area:turn_boundaries
Feature: One active turn, configuration only while idle
  A session does one thing at a time. While a turn or a Plan run is active, a second prompt,
  another plan and any change of mode, provider, model, permission mode or shell are
  refused; while a plan awaits approval, only approve and reject are accepted; once the
  session is idle again it takes changes (§5).

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
      And once the model answers, the turn completes as the only turn of the session

    @R5.1
    Scenario: The same prompt sent again during its turn is refused
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      When the user tries to send the same prompt again
      Then the request is refused with SESSION_BUSY
      And once the model answers, the turn completes as the only turn of the session

    @R5.1
    Scenario: Two prompts sent at once: one starts a turn, the other is refused as busy
      Given a session for the project
      And the model takes its time to answer
      When the user sends two prompts at once
      Then exactly one of the two prompts started a turn and the other was refused with SESSION_BUSY
      And once the model answers, the turn completes as the only turn of the session

    @R5.1
    Scenario: The same prompt sent again once its turn has ended starts a turn of its own
      Given a session for the project
      And the user sent the prompt "Run the checks again" and the model answered it
      When the user sends the prompt "Run the checks again" once more
      Then the second prompt started a turn of its own, which the model answered

    @R5.1 @R4.9
    Scenario: A prompt while an approved plan waits to run is refused
      Given a plan titled "Waiting" is awaiting approval
      And the plan was approved and waits to start
      When the user tries to send another prompt
      Then the request is refused with SESSION_BUSY

    @R5.1
    Scenario: A turn waiting for a permission answer still holds the session
      Given a session for the project with permission mode ask
      And the user started a turn that waits for a permission answer
      When the user tries to send another prompt
      Then the request is refused with SESSION_BUSY
      And the turn is still running

    @R5.3
    Scenario Outline: A <setting> change while a turn waits for a permission answer is refused
      Given a session for the project with permission mode ask
      And the user started a turn that waits for a permission answer
      When the user tries to change the <setting>
      Then the request is refused with SESSION_BUSY
      And the session's configuration is unchanged

      Examples:
        | setting         |
        | mode            |
        | permission mode |

    @R5.2
    Scenario: Asking for another plan while the planning turn runs is refused
      Given a session for the project in Plan mode
      And the model takes its time to answer
      And the user started a turn
      When the user tries to ask for another plan
      Then the request is refused with SESSION_BUSY
      And the turn is still running
      And once the model answers, the turn completes as the only turn of the session
      And no plan awaits approval

    @R5.5
    Scenario: Planning again while the approved plan is carried out is refused
      Given a plan titled "Carry it out" is awaiting approval
      And the model takes its time to carry out the plan
      And the user approved the plan with permission mode auto
      When the user tries to plan again
      Then the request is refused with SESSION_BUSY
      And the approved plan is still being carried out
      And the session is in Agent mode

  Rule: Configuration changes only while idle (§5)

    @R5.3
    Scenario Outline: Changing the <setting> during a turn is refused
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      When the user tries to change the <setting>
      Then the request is refused with SESSION_BUSY
      And the session's configuration is unchanged
      And the turn is still running

      Examples:
        | setting                         |
        | mode                            |
        | permission mode                 |
        | model                           |
        | provider                        |
        | mode to the same one            |
        | permission mode to the same one |

    @R5.4
    Scenario: Changing the shell during a turn is refused
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      When the user tries to change the shell
      Then the request is refused with SESSION_BUSY
      And the session's configuration is unchanged

    @R5.6
    Scenario Outline: A <setting> change refused during a turn is accepted once the turn ended
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      And the user tried to change the <setting>
      When the model answers and the turn ends
      And the user changes the <setting> of the session
      Then the session has the new <setting>

      Examples:
        | setting         |
        | mode            |
        | permission mode |
        | model           |
        | provider        |
        | shell           |

    @R5.6
    Scenario Outline: A <setting> change refused during a turn is not applied when the turn ends
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      And the user tried to change the <setting>
      When the model answers and the turn ends
      Then the session's configuration is unchanged

      Examples:
        | setting         |
        | mode            |
        | permission mode |
        | model           |
        | shell           |

    @R5.3
    Scenario Outline: Changing the <setting> of a scheduled run's session while the run is under way is refused
      Given a scheduled task's run is under way
      When the user tries to give the run's session another <setting>
      Then the request is refused with SESSION_BUSY
      And the configuration of the run's session is unchanged
      And a scheduled task's run is still under way

      Examples:
        | setting         |
        | mode            |
        | permission mode |

    @R5.6 @R5.9
    Scenario Outline: An idle session takes a change while <work> is under way
      Given a session for the project
      And <work> is under way
      When the user changes the mode of the session
      Then the session has the new mode
      And <work> is still under way

      Examples:
        | work                                     |
        | a turn of another session of the project |
        | a scheduled task's run                   |

    @R5.6
    Scenario: Changing the configuration while an approved plan waits to run is refused
      Given a plan titled "Waiting" is awaiting approval
      And the plan was approved and waits to start
      When the user tries to change the permission mode
      Then the request is refused with SESSION_BUSY
      And the session's configuration is unchanged

  Rule: While a plan awaits approval only approve and reject are accepted (§5)

    @R5.7
    Scenario: A prompt while a plan is pending is refused
      Given a plan titled "Pending" is awaiting approval
      When the user tries to send another prompt
      Then the request is refused with APPROVAL_PENDING
      And the plan still awaits the user's decision

    @R5.7
    Scenario Outline: Changing the <setting> while a plan is pending is refused
      Given a plan titled "Pending" is awaiting approval
      When the user tries to change the <setting>
      Then the request is refused with APPROVAL_PENDING
      And the session's configuration is unchanged
      And the plan still awaits the user's decision

      Examples:
        | setting                         |
        | mode                            |
        | permission mode                 |
        | model                           |
        | provider                        |
        | shell                           |
        | mode to the same one            |
        | permission mode to the same one |

    @R5.7 @R5.3
    Scenario Outline: A request the moment a plan is submitted is refused, busy or pending (<request>)
      Given a session for the project in Plan mode
      When the moment the plan is submitted the user tries to <request>
      Then the request is refused with SESSION_BUSY or APPROVAL_PENDING
      And once the Plan turn has ended the plan still awaits the user's decision
      And the session's configuration is unchanged

      Examples:
        | request                    |
        | send another prompt        |
        | change the permission mode |

    @R5.7
    Scenario: Cancelling the moment a plan is submitted is refused
      Given a session for the project in Plan mode
      When the moment the plan is submitted the user tries to cancel
      Then the request is refused with APPROVAL_PENDING
      And once the Plan turn has ended the plan still awaits the user's decision

    @R5.7
    Scenario: Cancelling while a plan is pending is refused
      Given a plan titled "Pending" is awaiting approval
      When the user tries to cancel
      Then the request is refused with APPROVAL_PENDING
      And the plan still awaits the user's decision

    @R5.7
    Scenario: Once the plan is rejected the session takes changes again
      Given a plan titled "Pending" is awaiting approval
      And the user rejects the plan
      When the user changes the mode of the session
      Then the session has the new mode

  Rule: An active turn can be cancelled (§5)

    @R5.1
    Scenario: Cancelling a turn ends it and frees the session
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      When the user cancels the turn
      Then the turn ended as cancelled
      And the session is idle
      And the session takes a new prompt

    @R5.1 @R5.9
    Scenario: A turn is cancelled while another session's plan awaits approval
      Given a session for the project
      And another session has a plan awaiting approval
      And the model takes its time to answer
      And the user started a turn
      When the user cancels the turn
      Then the turn ended as cancelled
      And the session is idle
      And the other session's plan still awaits approval

    @R1.3
    Scenario: A cancelled turn's prompt stays in the conversation
      Given a session for the project
      And the user's prompt "Where is the cache configured?" was accepted while the model takes its time
      When the user cancels the turn
      Then the turn ended as cancelled
      And the session's conversation still holds the prompt "Where is the cache configured?"

    @R5.1
    Scenario: Cancelling when nothing runs cancels nothing
      Given a session for the project
      When the user cancels the turn
      Then the host answers that no turn was running
      And the session is idle

    @R5.1
    Scenario: A second cancel after the turn ended cancels nothing
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      And the user cancelled the turn
      And the turn ended as cancelled
      When the user cancels the turn
      Then the host answers that no turn was running
      And the session is idle

    @R5.1
    Scenario: A cancel sent as the model's last answer arrives cancels the turn or comes too late, as its answer says
      Given a session for the project
      And the model takes its time before its last answer
      And the user started a turn
      When the model's last answer arrives and the user cancels the turn at once
      Then the cancel's answer agrees with how the turn ended
      And the session is idle
      And the session takes a new prompt

    @R5.1
    Scenario: A session's second cancelled turn is the one its cancel names
      Given a session for the project
      And the model takes its time to answer
      And the user started a turn
      And the user cancelled the turn
      And the turn ended as cancelled
      And the model takes its time to answer
      And the user started a turn
      When the user cancels the turn
      Then the cancel names the turn under way, which ended as cancelled

  Rule: A cancelled turn's permission question is closed (project rule P7)

    @P7
    Scenario: A question of a cancelled turn can no longer be answered
      Given a session for the project with permission mode ask
      And the user started a turn that waits for a permission answer
      And the user cancelled the turn
      When the user answers the question of the cancelled turn, allowing the call
      Then the request is refused with PERMISSION_REQUEST_NOT_FOUND
      And the project has no file "asked.txt"
