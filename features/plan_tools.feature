@area:plan_tools
Feature: What the agent may do while planning
  Plan is the same agent in a planning state. While planning, the host offers the model a
  fixed set of read-and-investigate tools plus SubmitPlan, and refuses everything that
  would change the project on its own authority (§1).

  Background:
    Given a connected client

  Rule: Plan offers exactly Read, Glob, Grep, BrowserPreview, Bash, EnterPlanMode, SubmitPlan and new_context (§1)

    @R1.4
    Scenario: The model is offered exactly the planning tools
      Given a session for the project in Plan mode
      And the model will answer "Here is what I found."
      When the user sends a prompt
      Then the tools offered to the model are exactly Read, Glob, Grep, BrowserPreview, Bash, EnterPlanMode, SubmitPlan, new_context

    @R1.9
    Scenario: There is no tool to leave Plan mode
      Given a session for the project in Plan mode
      And the model will answer "Nothing to do."
      When the user sends a prompt
      Then the model was not offered ExitPlanMode

    @R1.9
    Scenario: A call to ExitPlanMode is refused as an unknown tool
      Given a session for the project in Plan mode
      And the model will call ExitPlanMode
      When the user sends a prompt
      Then the ExitPlanMode call was refused with UNKNOWN_TOOL
      And the session is in Plan mode

  Rule: The host itself refuses Write, Edit, plugin tools and unknown tools while planning (§1)

    @R1.5
    Scenario Outline: A change the model attempts while planning is refused (<tool>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project in Plan mode
      And the model will call <tool> on "notes.txt"
      When the user sends a prompt
      Then the <tool> call was denied with <code>
      And nothing in the project changed

      Examples:
        | tool             | code         |
        | Write            | TOOL_DENIED  |
        | Edit             | TOOL_DENIED  |
        | mcp__files__save | TOOL_DENIED  |
        | TeleportFiles    | UNKNOWN_TOOL |

  Rule: Plan is the same agent as Agent, in a planning state (§1)

    @R1.3
    Scenario: Switching to Plan keeps the conversation
      Given a session for the project
      And the model will answer "I had a look."
      And the user had a conversation with the agent
      When the user switches the session to Plan mode
      And the user sends a prompt
      Then the model saw the earlier conversation
