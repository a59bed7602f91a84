@area:approval
Feature: Approving and rejecting a plan
  A submitted plan waits for the user. The only ways forward are Approve, which needs an
  explicit execution permission mode, and Reject, which is final and grants nothing. Once
  decided, a plan stays decided: no later action, from this client or a stale one, changes
  it (§3, §4, Consequences).

  Background:
    Given a connected client
    And a plan titled "Add caching" is awaiting approval

  Rule: The approval carries what the user needs to decide (§3, §7)

    @R3.1 @R7.2
    Scenario: The pending approval shows its title, question, artifact, expiry and status
      Then the approval shows its title, question, artifact, absolute expiry and status
      And the approval is recorded the same way in storage

  Rule: Approve and Reject are the only actions (§1, §3)

    @R1.10 @R3.3
    Scenario: There is no way to ask for changes
      When the user asks for changes to the plan
      Then the request is refused with METHOD_NOT_FOUND
      And the approval is pending
      And no execution was started

    @R3.7
    Scenario: Rejecting carries no feedback
      When the user rejects the plan with the feedback "Please use Redis"
      Then the request is refused with INVALID_PARAMS
      And the approval is pending

  Rule: Approve needs an explicit permission mode of ask, accept-edits or auto (§3)

    @R3.5
    Scenario: Approving without a permission mode is refused
      When the user approves the plan without choosing a permission mode
      Then the request is refused with INVALID_PARAMS
      And the approval and the session are unchanged
      And no execution was started

    @R3.5
    Scenario: Approving with an empty permission mode is refused
      When the user approves the plan with an empty permission mode
      Then the request is refused with INVALID_PARAMS
      And the approval and the session are unchanged
      And no execution was started

    @R3.4
    Scenario Outline: Approving with an unknown permission mode is refused (<case>)
      When the user approves the plan with the permission mode "<mode>"
      Then the request is refused with INVALID_PARAMS
      And the approval and the session are unchanged
      And no execution was started

      Examples:
        | case                       | mode         |
        | a mode of its own          | yolo         |
        | a capital letter           | Auto         |
        | a line break after a mode  | ask\n        |
        | an underscore for a hyphen | accept_edits |
        | a name written in camel case | acceptEdits |

    @R3.4 @R4.4 @R4.6 @R7.2 @C4
    Scenario Outline: Approving with <mode> switches the session to Agent with that mode
      Given 5 minutes passed
      When the user approves the plan with permission mode <mode>
      Then the session switched to Agent mode with permission mode <mode>
      And the approval answers with the approved plan and the session
      And the approval records permission mode <mode> and an execution
      And the approval was decided at the moment of the decision

      Examples:
        | mode         |
        | ask          |
        | accept-edits |
        | auto         |

  Rule: Reject is final and grants no permission mode (§3, Consequences)

    @R3.6 @R4.4 @R7.2
    Scenario: Rejecting keeps the session in Plan with its permission mode
      Given 5 minutes passed
      When the user rejects the plan
      Then the approval selects no permission mode and no execution
      And the session is in Plan mode
      And the session's permission mode is unchanged
      And the rejection answers with the rejected plan
      And the approval is rejected
      And the approval was decided at the moment of the decision
      And no execution was started

    @R3.6
    Scenario: Rejecting with a permission mode is refused
      When the user rejects the plan choosing permission mode auto
      Then the request is refused with INVALID_PARAMS
      And the approval is pending

  Rule: A decided plan stays decided (§3, §4, Consequences)

    @C6 @R4.4
    Scenario Outline: A rejected plan cannot be <decision> afterwards
      Given the user rejected the plan
      When a stale client <action>
      Then the request is refused with APPROVAL_NOT_PENDING
      And the approval is unchanged
      And the session is unchanged
      And no execution was started

      Examples:
        | decision       | action                                      |
        | approved       | approves the plan with permission mode auto |
        | rejected again | rejects the plan                            |

    @C6 @R4.4
    Scenario: A plan rejected before its deadline stays rejected after it
      Given the user rejected the plan
      And 31 minutes passed
      When a stale client approves the plan with permission mode ask
      Then the request is refused with APPROVAL_NOT_PENDING
      And the approval is unchanged
      And no execution was started

    @R3.8 @R4.4
    Scenario Outline: An approved plan cannot be <decision> afterwards
      Given the user approved the plan with permission mode auto
      And the execution has finished
      When a stale client <action>
      Then the request is refused with APPROVAL_NOT_PENDING
      And the approval is unchanged
      And the session is unchanged
      And the model received no new request

      Examples:
        | decision       | action                                     |
        | approved again | approves the plan with permission mode ask |
        | rejected       | rejects the plan                           |

    @R4.4
    Scenario Outline: A plan interrupted by a restart cannot be <decision> afterwards
      When the host restarts
      And a stale client <action>
      Then the request is refused with APPROVAL_NOT_PENDING
      And the approval is unchanged
      And the session is unchanged
      And no execution was started

      Examples:
        | decision | action                                      |
        | approved | approves the plan with permission mode auto |
        | rejected | rejects the plan                            |

  Rule: Approval never happens implicitly (§3)

    @R3.8
    Scenario: A reloaded client finds the plan still waiting
      When the client reloads and reads the approval again
      Then the approval is pending
      And the deadline is unchanged
      And no execution was started

    @R3.8 @C2
    Scenario: A reloaded client can still approve
      Given the client reloads and reads the approval again
      And the model will answer "The plan is carried out."
      When the user approves the plan with permission mode ask
      Then the approval records permission mode ask and an execution

    @R3.8 @R5.7
    Scenario: A stale approval during the execution is refused at once
      Given the model will call Write on "notes.txt"
      And the user approved the plan with permission mode ask
      And the host asked permission before Write
      When a stale client approves the plan with permission mode auto
      Then the request is refused with APPROVAL_NOT_PENDING
      And no permission was given without the user

    @R3.8 @C6
    Scenario: Approving an earlier, rejected plan leaves the newer plan waiting
      Given the user rejected the plan
      And the model submitted a new plan titled "Second attempt"
      When a stale client approves the first plan with permission mode auto
      Then the request is refused with APPROVAL_NOT_PENDING
      And the plan titled "Second attempt" is still awaiting approval
      And no execution was started

    @C6 @R4.4
    Scenario: A stale rejection of an earlier plan leaves the newer plan waiting
      Given the user rejected the plan
      And the model submitted a new plan titled "Second attempt"
      When a stale client rejects the first plan
      Then the request is refused with APPROVAL_NOT_PENDING
      And the plan titled "Second attempt" is still awaiting approval

  Rule: Only one plan waits for approval at a time (§4)

    @R4.8
    Scenario: Another plan cannot be asked for while one is waiting
      Given the model will submit a plan titled "Second attempt"
      When the user tries to ask for another plan
      Then the request is refused with APPROVAL_PENDING

    @R4.8 @R5.7
    Scenario: A waiting plan still holds its session after many other sessions have worked
      Given 10 other sessions of the project have each answered a prompt
      And the model will submit a plan titled "Second attempt"
      When the user tries to ask for another plan
      Then the request is refused with APPROVAL_PENDING
      And the plan titled "Add caching" is still awaiting approval
      And only the plan titled "Add caching" is awaiting approval

  Rule: Approval is one transaction (§4)

    @R4.6
    Scenario: A failure while approving changes nothing
      Given the host will fail to commit the next approval
      When the user approves the plan with permission mode auto
      Then the request is refused with INTERNAL_ERROR
      And the approval and the session are unchanged
      And no execution was started
      And the plan can still be approved with permission mode ask

    @R4.6
    Scenario: A failure armed twice for approving fails only the next approval
      Given the host will fail to commit the next approval
      And the host was told a second time to fail the next approval
      When the user approves the plan with permission mode auto
      Then the request is refused with INTERNAL_ERROR
      And the plan can be approved at the next attempt

    @R4.6
    Scenario: A failure armed for approving leaves a rejection alone
      Given the host will fail to commit the next approval
      When the user rejects the plan
      Then the plan was rejected all the same
      And the approval selects no permission mode and no execution

    @R4.6 @C8
    Scenario: A failed approval leaves the next execution held back
      Given the host will fail to commit the next approval
      And the host will hold back the next approved execution
      And approving the plan with permission mode auto failed
      When the user approves the plan with permission mode auto
      Then the approved plan is still queued and nothing of it has started

    @R4.4 @R4.9
    Scenario: Two approvals sent at once: exactly one wins
      Given the model will answer "The plan is carried out."
      When the user approves the plan twice at once with permission mode auto
      Then exactly one of the two approvals succeeded
      And exactly one execution ran

  Rule: A session's plans are listed oldest first (§7)

    # 01:46:40 UTC on 9 September 2001 is when the count of milliseconds since 1970
    # gains a digit: compared as text, the later plans would come first.
    @R7.2
    Scenario: Plans from either side of a round clock reading are listed oldest first
      Given the user rejected the plan
      And the host clock was set to 9 September 2001, a minute before 01:46:40 UTC
      And the model submitted a new plan titled "Just before"
      And the user rejected the plan
      And 2 minutes passed
      When the model submits a new plan titled "Just after"
      Then the session's plans are listed oldest first: "Just before", "Just after", "Add caching"
