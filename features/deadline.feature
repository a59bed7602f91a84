@area:deadline
Feature: The absolute approval deadline
  A plan waits at most 30 minutes from the moment the host created it, on the host's own
  clock. Looking at it again never buys more time, and when the time is up the host
  records the expiry itself (§3).

  Background:
    Given a connected client
    And a plan titled "Migrate the database" is awaiting approval

  Rule: The deadline is 30 minutes after creation, fixed at creation (§3)

    @R3.9
    Scenario: The deadline is 30 minutes after the host created the approval
      Then the approval expires 30 minutes after the host created it

    @R3.12
    Scenario: Reading the approval again does not move the deadline
      Given 10 minutes passed
      When the user opens the plan artifact
      Then the deadline is unchanged

    @R3.10
    Scenario: A reloaded client sees the original deadline
      Given 20 minutes passed
      When the client reloads and reads the approval again
      Then the deadline is unchanged

  Rule: At the deadline the host records the expiry by itself (§3)

    @R3.11 @R3.8
    Scenario: The plan expires when the time is up
      When 30 minutes pass
      Then the approval expired with PLAN_APPROVAL_TIMEOUT
      And no execution was started
      And the session is in Plan mode

    @R3.11
    Scenario: One millisecond before the deadline the plan can still be approved
      Given the clock reached one millisecond before the deadline
      And the model will answer "The plan is carried out."
      When the user approves the plan with permission mode ask
      Then the approval records permission mode ask and an execution

    @R3.11
    Scenario: Exactly at the deadline approval is refused
      Given the clock reached exactly the deadline
      When the user approves the plan with permission mode ask
      Then the request is refused with PLAN_APPROVAL_TIMEOUT
      And the approval expired with PLAN_APPROVAL_TIMEOUT
      And no execution was started

    @R3.11
    Scenario: After the deadline rejection is refused too
      Given the clock reached one millisecond after the deadline
      When the user rejects the plan
      Then the request is refused with PLAN_APPROVAL_TIMEOUT
      And the approval is expired

    @R3.11 @R1.11
    Scenario: After expiry a new plan can be submitted
      Given 31 minutes passed
      And the model will submit a plan titled "Second attempt"
      When the user asks for another plan
      Then an approval is pending for the plan titled "Second attempt"
