@area:submit_plan
Feature: Submitting a plan
  SubmitPlan is how a Plan turn ends: the model hands over a title, the plan in Markdown
  and a question for the user. It must stand alone, only in an active Plan turn, with
  exactly those three fields (§1).

  Background:
    Given a connected client

  Rule: A Plan turn ends with one pending approval (§1, §2)

    @R1.7 @R2.1
    Scenario: The model submits a plan
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Add a cache"
      When the user asks for a plan
      Then an approval is pending for the plan titled "Add a cache"
      And the plan artifact holds exactly the submitted markdown
      And the session is in Plan mode

  Rule: SubmitPlan must be the only tool call of its message (§1)

    @R1.6
    Scenario Outline: A plan submitted beside another call is refused as a whole (<tool>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project in Plan mode
      And the model will submit a plan together with a <tool> call
      When the user asks for a plan
      Then every call of that message was refused with SUBMIT_PLAN_NOT_ALONE
      And no approval exists
      And nothing in the project changed

      Examples:
        | tool |
        | Read |
        | Bash |

  Rule: SubmitPlan is valid only in the active Plan turn (§1)

    @R1.7
    Scenario: SubmitPlan in Agent mode is refused
      Given a session for the project
      And the model will submit a plan titled "Too early"
      When the user sends a prompt
      Then the SubmitPlan call was denied with SUBMIT_PLAN_OUTSIDE_PLAN_TURN
      And no approval exists
      And nothing in the project changed

  Rule: The input is exactly title, markdown and question, all text (§1)

    @R1.8
    Scenario Outline: A malformed submission is refused and creates nothing (<arguments>)
      Given a session for the project in Plan mode
      And the model will submit a plan with the input <arguments>
      When the user asks for a plan
      Then the SubmitPlan call was refused with INVALID_TOOL_INPUT
      And no approval exists
      And nothing in the project changed

      Examples:
        | arguments                                                                      |
        | {"title": "T", "markdown": "# M"}                                              |
        | {"title": "T", "markdown": "# M", "question": "Q", "steps": ["one"]}           |
        | {"title": "T", "markdown": "# M", "question": "Q", "proposedCommands": ["ls"]} |
        | {"title": 7, "markdown": "# M", "question": "Q"}                               |
        | {"title": "T", "markdown": ["# M"], "question": "Q"}                           |
        | {"title": "T", "markdown": "# M", "question": null}                            |
        | not json at all                                                                |

  Rule: A session without a project cannot hold a plan artifact (§2)

    @R2.8
    Scenario: A plan in a session without a project is refused
      Given a session without a project in Plan mode
      And the model will submit a plan titled "Nowhere to go"
      When the user asks for a plan
      Then the SubmitPlan call was refused with WORKSPACE_REQUIRED
      And no approval exists

  Rule: A revision is a new submission after a rejection (§1, Consequences)

    @R1.11 @C7
    Scenario: A rejected plan is revised by a new turn with a new artifact
      Given a session for the project in Plan mode
      And the model will submit a plan titled "First idea"
      And the user asks for a plan
      And the user rejects the plan
      And the model will submit a plan titled "Second idea"
      When the user asks for another plan
      Then an approval is pending for the plan titled "Second idea"
      And each submission has its own artifact

  Rule: While a plan awaits approval, no further plan can be submitted (§4, §5)

    @R4.8 @R5.2
    Scenario: A prompt while a plan is pending is refused
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Only one"
      And the user asks for a plan
      When the user tries to send another prompt
      Then the request is refused with APPROVAL_PENDING
      And the session has 1 artifacts in its plan folder
