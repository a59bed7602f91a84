@area:approval
Feature: Approving and rejecting a plan
  A submitted plan waits for the user. The only ways forward are Approve, which needs an
  explicit execution permission mode, and Reject, which is final and grants nothing (§3, §4).

  Background:
    Given a connected client
    And a plan titled "Add caching" is awaiting approval

  Rule: The approval carries what the user needs to decide (§3, §7)

    @R3.1 @R7.2
    Scenario: The pending approval shows its title, question, artifact, expiry and status
      Then the approval shows its title, question, artifact, absolute expiry and status

  Rule: Approve and Reject are the only actions (§1, §3)

    @R1.10 @R3.3
    Scenario: There is no way to ask for changes
      When the user asks for changes to the plan
      Then the request is refused with METHOD_NOT_FOUND
      And the approval is pending

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

    @R3.4
    Scenario: Approving with an unknown permission mode is refused
      When the user approves the plan with the permission mode "yolo"
      Then the request is refused with INVALID_PARAMS
      And the approval and the session are unchanged
      And no execution was started

    @R3.4 @R4.6 @C4
    Scenario Outline: Approving switches the session to Agent with the chosen mode (<mode>)
      Given the model will answer "The plan is carried out."
      When the user approves the plan with permission mode <mode>
      Then the session is in Agent mode with permission mode <mode>
      And the approval records permission mode <mode> and an execution

      Examples:
        | mode         |
        | ask          |
        | accept-edits |
        | auto         |

  Rule: Reject is final and grants no permission mode (§3, Consequences)

    @R3.6
    Scenario: Rejecting keeps the session in Plan with its permission mode
      When the user rejects the plan
      Then the approval is rejected
      And the session is in Plan mode
      And the session's permission mode is unchanged
      And the approval selects no permission mode and no execution
      And no execution was started

    @R3.6
    Scenario: Rejecting with a permission mode is refused
      When the user rejects the plan choosing permission mode auto
      Then the request is refused with INVALID_PARAMS
      And the approval is pending

    @C6 @R4.4
    Scenario: A rejected plan cannot be approved afterwards
      Given the user rejects the plan
      When a stale client approves the plan with permission mode auto
      Then the request is refused with APPROVAL_NOT_PENDING
      And the approval is rejected
      And no execution was started

  Rule: Approval never happens implicitly (§3)

    @R3.8
    Scenario: A reloaded client finds the plan still waiting
      When the client reloads and reads the approval again
      Then the approval is pending
      And no execution was started

    @R3.8 @C2
    Scenario: A reloaded client can still approve
      Given the client reloads and reads the approval again
      And the model will answer "The plan is carried out."
      When the user approves the plan with permission mode ask
      Then the approval records permission mode ask and an execution

    @R3.8
    Scenario: A stale client cannot approve an approved plan again
      Given the model will answer "The plan is carried out."
      And the user approved the plan with permission mode auto
      When a stale client approves the plan with permission mode ask
      Then the request is refused with APPROVAL_NOT_PENDING
      And the session is in Agent mode with permission mode auto

    @R3.8 @R5.7
    Scenario: A stale approval during the execution is refused at once
      Given the model will call Write on "notes.txt"
      And the user approved the plan with permission mode ask
      And the host asked permission before Write
      When a stale client approves the plan with permission mode auto
      Then the request is refused with APPROVAL_NOT_PENDING
      And no permission was given without the user

  Rule: Approval is one transaction (§4)

    @R4.6
    Scenario: A failure while approving changes nothing
      Given the host will fail to commit the next approval
      When the user approves the plan with permission mode auto
      Then the request is refused with INTERNAL_ERROR
      And the approval and the session are unchanged
      And no execution was started

    @R4.4 @R4.9
    Scenario: Two approvals sent at once: exactly one wins
      Given the model will answer "The plan is carried out."
      When the user approves the plan twice at once with permission mode auto
      Then exactly one of the two approvals succeeded
