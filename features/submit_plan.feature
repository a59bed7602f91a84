@area:submit_plan
Feature: Submitting a plan
  SubmitPlan is how a Plan turn ends: the model hands over a title, the plan in Markdown
  and a question for the user. It must stand alone, only in an active Plan turn, with
  exactly those three fields (§1). A plan that was rejected or ran out of time is revised
  by a new submission in a new turn, never by editing the old one (§1, Consequences).

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

  Rule: A submitted plan ends its turn; the model is not asked again in that turn (project rule P11)

    @P11
    Scenario: Submitting a plan ends the turn
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Add a cache"
      When the user asks for a plan
      Then the turn completed after the submission without asking the model again
      And an approval is pending for the plan titled "Add a cache"

    @P11
    Scenario: A plan submitted after looking around ends the turn too
      Given the project has a file "notes.txt" containing "the cache is slow"
      And a session for the project in Plan mode
      And the model will read "notes.txt" and then submit a plan titled "Speed up the cache"
      When the user asks for a plan
      Then the turn completed after the submission without asking the model again
      And an approval is pending for the plan titled "Speed up the cache"

  Rule: SubmitPlan must be the only tool call of its message (§1)

    @R1.6
    Scenario Outline: A plan submitted beside another call is refused as a whole (<arrangement>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project in Plan mode
      And the model will submit a plan <arrangement>
      When the user asks for a plan
      Then every call of that message was refused with SUBMIT_PLAN_NOT_ALONE
      And no approval exists
      And nothing in the project changed

      Examples:
        | arrangement                        |
        | together with a Read call          |
        | together with a Bash call          |
        | followed by a Glob call            |
        | together with a Write call         |
        | followed by a TeleportFiles call   |

    @R1.6
    Scenario: Two plans in one message are both refused
      Given a session for the project in Plan mode
      And the model will submit two plans in one message
      When the user asks for a plan
      Then every call of that message was refused with SUBMIT_PLAN_NOT_ALONE
      And no approval exists

    @R1.6 @R1.8
    Scenario Outline: A plan submitted again alone and whole after a refusal awaits approval (<flaw>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project in Plan mode
      And the model will submit a plan titled "Second try" <flaw>, and submit it alone and whole once that was refused
      When the user asks for a plan
      Then the plan titled "Second try" submitted again in the same turn awaits approval

      Examples:
        | flaw                 |
        | beside a Read call   |
        | without its question |

  Rule: SubmitPlan is valid only in the active Plan turn (§1)

    @R1.7
    Scenario: SubmitPlan in Agent mode is refused
      Given a session for the project
      And the model will try to submit a plan titled "Too early"
      When the user sends a prompt
      Then the SubmitPlan call was refused with SUBMIT_PLAN_OUTSIDE_PLAN_TURN
      And no approval exists
      And nothing in the project changed

    @R1.7
    Scenario: SubmitPlan while an approved plan is carried out is refused
      Given a plan titled "Carry it out" is awaiting approval
      And the model will try to submit a plan titled "A second plan on the side"
      When the user approves the plan with permission mode auto
      And the approved plan has been carried out
      Then the SubmitPlan call was refused with SUBMIT_PLAN_OUTSIDE_PLAN_TURN
      And the only approval is the one for "Carry it out"

  Rule: The input is exactly title, markdown and question, all text (§1)

    @R1.8
    Scenario Outline: A malformed submission is refused and creates nothing (<case>)
      Given a session for the project in Plan mode
      And the model will submit a plan with the input <arguments>
      When the user asks for a plan
      Then the SubmitPlan call was refused with INVALID_TOOL_INPUT
      And no approval exists
      And nothing in the project changed

      Examples:
        | case                          | arguments                                                                      |
        | the question is missing       | {"title": "T", "markdown": "# M"}                                              |
        | structured steps are added    | {"title": "T", "markdown": "# M", "question": "Q", "steps": ["one"]}           |
        | proposed commands are added   | {"title": "T", "markdown": "# M", "question": "Q", "proposedCommands": ["ls"]} |
        | the title is a number         | {"title": 7, "markdown": "# M", "question": "Q"}                               |
        | the markdown is a list        | {"title": "T", "markdown": ["# M"], "question": "Q"}                           |
        | the question is null          | {"title": "T", "markdown": "# M", "question": null}                            |
        | the title is NaN              | {"title": NaN, "markdown": "# M", "question": "Q"}                             |
        | the title overflows a number  | {"title": 1e400, "markdown": "# M", "question": "Q"}                           |
        | the fields come as a list     | ["T", "# M", "Q"]                                                              |
        | the input is not JSON         | not json at all                                                                |

    @R1.8
    Scenario: A submission whose fields come as one JSON text is refused and creates nothing
      Given a session for the project in Plan mode
      And the model will submit a plan whose fields come as one JSON text
      When the user asks for a plan
      Then the SubmitPlan call was refused with INVALID_TOOL_INPUT
      And no approval exists
      And nothing in the project changed

  Rule: A session without a project cannot hold a plan artifact (§2)

    @R2.8
    Scenario: A plan in a session without a project is refused
      Given a session without a project in Plan mode
      And the model will try to submit a plan titled "Nowhere to go"
      When the user asks for a plan
      Then the SubmitPlan call was refused with WORKSPACE_REQUIRED
      And no approval exists

  Rule: A revision is a new submission after the plan was rejected or ran out of time (§1, Consequences)

    @R1.11 @C7
    Scenario Outline: A plan is revised by a new turn with a new artifact after it was <ended>
      Given a session for the project in Plan mode
      And the model will submit a plan titled "First idea"
      And the user asks for a plan
      And <ending>
      And the model will submit a plan titled "Second idea"
      When the user asks for another plan
      Then an approval is pending for the plan titled "Second idea"
      And the first plan is still <ended> with its artifact unchanged
      And each submission has its own artifact

      Examples:
        | ended    | ending                     |
        | rejected | the user rejected the plan |
        | expired  | the plan's time ran out    |

    @C7
    Scenario Outline: Ending a plan starts no new turn by itself (<ended>)
      Given a session for the project in Plan mode
      And the model will submit a plan titled "First idea"
      And the user asks for a plan
      And <ending>
      Then no turn starts on its own while the user waits a moment
      Given the model will answer "Ready when you are."
      When the user sends a prompt
      Then no turn started on its own after the plan ended

      Examples:
        | ended    | ending                     |
        | rejected | the user rejected the plan |
        | expired  | the plan's time ran out    |

  Rule: A plan is taken whatever the host clock reads (§2, §3)

    @R2.1 @R3.9
    Scenario: A plan is taken when the host clock reads a year past 9999
      Given the host clock was set ten thousand years ahead
      And a plan titled "Far ahead" is awaiting approval
      Then the approval was created when the model submitted the plan
      And the approval expires 30 minutes after the host created it

  Rule: A rejection or an expiry leaves the session's permission mode as it was (§3)

    @R3.6 @R3.11
    Scenario Outline: Rejecting a plan leaves the session's permission mode <mode>
      Given a session for the project in Plan mode with permission mode <mode>
      And a plan titled "Add caching" is awaiting approval
      When the user rejects the plan
      Then the approval is rejected
      And the session is in Plan mode
      And the session's permission mode is unchanged

      Examples:
        | mode         |
        | accept-edits |
        | auto         |

    @R3.11
    Scenario Outline: A plan that ran out of time leaves the session's permission mode <mode>
      Given a session for the project in Plan mode with permission mode <mode>
      And a plan titled "Add caching" is awaiting approval
      When 30 minutes pass
      Then the approval expired with PLAN_APPROVAL_TIMEOUT
      And the session is in Plan mode
      And the session's permission mode is unchanged

      Examples:
        | mode         |
        | accept-edits |
        | auto         |

  Rule: While a plan awaits approval, no further plan can be submitted (§4, §5)

    @R4.8 @R5.2
    Scenario: A prompt while a plan is pending is refused
      Given a session for the project in Plan mode
      And the model will submit a plan titled "Only one"
      And the user asks for a plan
      When the user tries to send another prompt
      Then the request is refused with APPROVAL_PENDING
      And the session has 1 artifacts in its plan folder
