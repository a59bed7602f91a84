@area:deadline
Feature: The absolute approval deadline
  A plan waits at most 30 minutes from the moment the host created it, on the host's own
  clock, however long the model took to write it. Looking at it again never buys more
  time, and when the time is up the host records the expiry itself, whether or not anyone
  is looking (§3).

  Background:
    Given a connected client
    And the model spent 7 minutes preparing a plan titled "Migrate the database"

  Rule: The deadline is 30 minutes after creation, fixed at creation (§3)

    @R3.9
    Scenario: The deadline is 30 minutes after the host created the approval
      Then the approval was created when the model submitted the plan
      And the approval expires 30 minutes after the host created it

    @R3.12
    Scenario: Opening the plan again does not move the deadline
      Given 10 minutes passed
      When the user opens the plan artifact
      Then the deadline is unchanged
      And the plan still expires at its original deadline

    @R3.10
    Scenario: A reloaded client sees the original deadline
      Given 20 minutes passed
      When the client reloads and reads the approval again
      Then the deadline is unchanged
      And the plan still expires at its original deadline

  Rule: At the deadline the host records the expiry by itself (§3)

    @R3.11 @R3.8 @P32
    Scenario: The plan expires when the time is up, with nobody looking
      When 30 minutes pass
      Then the host announced the expiry on its own
      And the approval expired with PLAN_APPROVAL_TIMEOUT
      And no execution was started
      And the session is in Plan mode

    @R3.11 @R3.5
    Scenario: A plan still expires on its own after an approval without a permission mode was refused
      Given the user tried to approve the plan without choosing a permission mode
      When 30 minutes pass
      Then the host announced the expiry on its own
      And the approval expired with PLAN_APPROVAL_TIMEOUT

    @R3.11 @P32
    Scenario: Each waiting plan expires at its own deadline, also when another waits longer
      Given 10 minutes passed
      And another session has a plan awaiting approval
      When 25 minutes pass
      Then the host announced the expiry on its own
      And the approval expired with PLAN_APPROVAL_TIMEOUT
      And the plan of the other session, submitted later, still waits for approval

    @R3.11
    Scenario: A plan submitted after a rejected one expires at its own deadline
      Given the user rejected the plan
      And 10 minutes passed
      And the model submitted a new plan titled "Second attempt"
      When 30 minutes pass
      Then the host announced the expiry on its own
      And the approval expired with PLAN_APPROVAL_TIMEOUT

    @R3.9 @R3.11
    Scenario: A plan submitted after a rejected one still waits at the rejected plan's deadline
      Given the user rejected the plan
      And 10 minutes passed
      And the model submitted a new plan titled "Second attempt"
      When 20 minutes pass
      Then the revised plan titled "Second attempt" still awaits approval at the first plan's deadline
      And the plan titled "Second attempt" is still awaiting approval

    @R3.11 @R5.9
    Scenario: A plan expires when the time is up while another session's turn is under way
      Given another session's turn is under way
      When 30 minutes pass
      Then the host announced the expiry on its own
      And the approval expired with PLAN_APPROVAL_TIMEOUT

    @R3.11 @R4.5
    Scenario: A plan approved before its deadline is carried out past it
      Given the model will take its time to carry out the plan
      And the user approved the plan with permission mode auto
      And the execution was running while the model worked
      When 30 minutes pass
      And the model finishes its work
      Then the execution has completed

    @R3.11
    Scenario: Deciding one plan leaves another session's plan of the same moment to expire
      Given another session has a plan awaiting approval
      And the user rejected the plan
      When 30 minutes pass
      Then the plan of the other session expired on its own

    @R3.11
    Scenario: Two plans of one project waiting at once both expire at their deadline
      Given another session of the same project has a plan awaiting approval
      When 30 minutes pass
      Then the first session's plan expired on its own
      And the plan of the other session expired on its own

    @R3.11
    Scenario: One millisecond before the deadline the plan can still be approved
      Given the clock reached one millisecond before the deadline
      And the model will answer "The plan is carried out."
      When the user approves the plan with permission mode ask
      Then the approval records permission mode ask and an execution
      And the approval was decided at the moment of the decision

    @R3.11
    Scenario: A plan still pending one millisecond before its deadline expires on its own when the deadline comes
      Given the clock reached one millisecond before the deadline
      When the clock reaches exactly the deadline
      Then the host announced the expiry on its own
      And the approval expired with PLAN_APPROVAL_TIMEOUT

    @R3.11 @R3.8
    Scenario: A clock set back does not bring the deadline closer
      Given the host clock was set back an hour
      When the clock reaches one millisecond before the deadline
      Then the plan titled "Migrate the database" is still awaiting approval

    @R3.11
    Scenario: A plan still expires on its own at its deadline after the clock was set back
      Given the host clock was set back an hour
      When the clock reaches exactly the deadline
      Then the host announced the expiry on its own
      And the approval expired with PLAN_APPROVAL_TIMEOUT

    @R3.11 @R1.11
    Scenario: After expiry a new plan can be submitted
      Given 31 minutes passed
      And the model will submit a plan titled "Second attempt"
      When the user asks the agent for a new plan
      Then an approval is pending for the plan titled "Second attempt"

    @P14 @R1.11
    Scenario: A plan submitted after an expiry can be approved before its own deadline
      Given 31 minutes passed
      And the model will submit a plan titled "Second attempt"
      And the user asked for another plan
      And the revised plan titled "Second attempt" is the one awaiting approval
      When the user approves the plan with permission mode ask
      Then the approval records permission mode ask and an execution

  Rule: A decision at or after the deadline is refused as timed out (project rule P14)

    @P14
    Scenario Outline: <decision> when the clock shows <moment> the deadline is refused as timed out
      Given the clock reached <moment> the deadline
      When the user <action>
      Then the request is refused with PLAN_APPROVAL_TIMEOUT
      And the approval expired with PLAN_APPROVAL_TIMEOUT
      And no execution was started

      Examples:
        | decision  | moment                | action                                      |
        | Approving | exactly               | approves the plan with permission mode ask  |
        | Rejecting | exactly               | rejects the plan                            |
        | Approving | one millisecond after | approves the plan with permission mode auto |
        | Rejecting | one millisecond after | rejects the plan                            |

    @P14 @R4.4
    Scenario Outline: An expired plan cannot be <decision> afterwards
      Given 31 minutes passed
      When a stale client <action>
      Then the request is refused with PLAN_APPROVAL_TIMEOUT
      And the approval is unchanged
      And the session is unchanged
      And no execution was started

      Examples:
        | decision | action                                      |
        | approved | approves the plan with permission mode auto |
        | rejected | rejects the plan                            |

    @P14 @R4.4
    Scenario: An expired plan stays expired when the clock is set back
      Given 31 minutes passed
      And the host clock was set back an hour
      When a stale client approves the plan with permission mode auto
      Then the request is refused with PLAN_APPROVAL_TIMEOUT
      And the approval is unchanged
      And no execution was started
