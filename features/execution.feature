@area:execution
Feature: Executing an approved plan
  Approval hands the plan to the same agent, now in Agent mode with the chosen permission
  mode. The execution is queued, runs, and completes (or is interrupted when its turn is
  cancelled); the agent starts from the approved plan and the conversation that produced
  it. The permission mode then governs which tool calls ask the user first, in the
  execution and in every later request (§3, §4).

  Background:
    Given a connected client
    And a plan titled "Write the notes" is awaiting approval

  Rule: The same agent runs the approved plan: queued, running, completed (§4)

    @R4.5 @R4.6 @C4
    Scenario: An approved plan is queued, runs and completes
      Given the model will take its time to carry out the plan
      When the user approves the plan with permission mode auto
      Then the approval answers that the execution is queued
      And the execution is running while the model works
      When the model finishes its work
      Then the execution has completed
      And the session switched to Agent mode with permission mode auto

    @R4.5
    Scenario: An execution whose turn is cancelled is interrupted
      Given the model will take its time to carry out the plan
      When the user approves the plan with permission mode auto
      Then the execution is running while the model works
      When the user cancels the turn
      Then the execution was interrupted

    @R4.5 @R5.6
    Scenario: A cancel while an approved plan waits in the queue leaves the session as the plan reads
      Given the host will hold back the next approved execution
      And the user approved the plan with permission mode auto
      When the user cancels the turn
      Then the cancel named no turn, and the queued execution either still waits or was interrupted, as the session reports

    @R4.5
    Scenario: An execution whose turn is cancelled as soon as it has started is interrupted
      Given the model will take its time to carry out the plan
      When the user approves the plan with permission mode auto
      And the user cancels the turn as soon as it has started
      Then the execution was interrupted

    @R4.4 @C6
    Scenario: A plan whose execution was cancelled cannot be approved again
      Given the model will take its time to carry out the plan
      And the user approved the plan with permission mode auto
      And the execution was running while the model worked
      And the user cancelled the execution's turn
      When a stale client approves the plan with permission mode auto
      Then the request is refused with APPROVAL_NOT_PENDING
      And no execution was started

    @R4.9
    Scenario: After a cancelled execution, the session's next plan is carried out
      Given the model will take its time to carry out the plan
      And the user approved the plan with permission mode auto
      And the execution was running while the model worked
      And the user cancelled the execution's turn
      And the user switched the session to Plan mode
      And the model submitted a new plan titled "Second try"
      When the user approves the plan with permission mode auto
      Then the new plan was approved and carried out

    @R4.5
    Scenario: Carrying out the session's next plan leaves the cancelled execution interrupted
      Given the model will take its time to carry out the plan
      And the user approved the plan with permission mode auto
      And the execution was running while the model worked
      And the user cancelled the execution's turn
      And the user switched the session to Plan mode
      And the model submitted a new plan titled "Second try"
      When the user approves the plan with permission mode auto
      Then the new plan was approved and carried out
      And the cancelled plan's execution still reads interrupted

    @P7 @R4.5
    Scenario: After a cancelled execution, later requests keep the permission mode the plan was approved with
      Given the model will take its time to carry out the plan
      And the user approved the plan with permission mode auto
      And the execution was running while the model worked
      And the user cancelled the execution's turn
      And the model will run the command "echo later > later.txt"
      When the user sends a new request to the agent
      Then the Bash call ran without the user being asked
      And the agent has finished the request

    @C8
    Scenario: An execution held back stays queued while another session plans and the clock moves
      Given the host will hold back the next approved execution
      And another session has a plan awaiting approval
      And the user approved the plan with permission mode auto
      When the host clock moves on a minute
      Then the approved plan is still queued and nothing of it has started

    @R4.5
    Scenario: An execution whose turn fails is interrupted
      Given the model provider will refuse the request that carries out the plan
      When the user approves the plan with permission mode auto
      Then the execution's turn failed and the execution was interrupted

    @R4.7
    Scenario: The same agent carries out the plan, with the conversation that produced it
      When the user approves the plan with permission mode auto
      Then the execution turn belongs to the session of the plan
      And the model was given the conversation that produced the plan
      And the execution runs to completion

    @P15
    Scenario: The execution starts from the approved plan's artifact and content
      When the user approves the plan with permission mode auto
      Then the model was given the approved plan's path and full content
      And the execution runs to completion

    @P15
    Scenario Outline: The execution of a revised plan starts from the revision (<revision>)
      Given the user rejected the plan
      And the model will submit a plan titled "<title>" with other steps
      And the user asked for another plan
      And the revised plan titled "<title>" is the one awaiting approval
      When the user approves the plan with permission mode auto
      Then the model was given the approved plan's path and full content
      And the execution runs to completion

      Examples:
        | revision             | title                       |
        | under a new title    | Write the notes, second try |
        | under the same title | Write the notes             |

    @P15
    Scenario Outline: The execution is given the plan's text exactly as submitted (<sample>)
      Given the user rejected the plan
      And the model will submit a plan whose markdown has <sample>
      And the user asked for another plan
      And the revised plan titled "Sample plan" is the one awaiting approval
      When the user approves the plan with permission mode auto
      Then the model was given the approved plan's path and full content

      Examples:
        | sample                |
        | CRLF line endings     |
        | lone CR line endings  |
        | decomposed accents    |
        | trailing spaces       |

    @P10 @R4.7
    Scenario: A new context during the execution replaces the planning conversation
      Given the model will start a new context summarised as "Summary: write the notes" and then answer
      When the user approves the plan with permission mode auto
      Then once the execution started a new context, the model saw its summary instead of the planning

    @R1.3
    Scenario: A request after the execution remembers what the execution said
      Given the user approved the plan with permission mode auto
      And the execution has finished
      When the user sends a new request to the agent
      Then the agent was given what the execution said

  Rule: A session runs one execution at a time (§4)

    @R4.9
    Scenario: A plan made during an execution is carried out after that execution ended
      Given the model will turn to planning during the execution and submit a plan titled "Follow-up"
      And the user approved the plan with permission mode auto
      When the user approves the plan titled "Follow-up" as soon as it is submitted, with permission mode auto
      Then the follow-up plan is carried out after the earlier execution has ended

    @R4.8
    Scenario: A plan made during an execution still waits for the user once that execution ended
      Given the model will turn to planning during the execution and submit a plan titled "Follow-up"
      And the user approved the plan with permission mode auto
      And the execution has finished
      When the user tries to send another prompt
      Then the request is refused with APPROVAL_PENDING
      And the plan titled "Follow-up" is still awaiting approval
      And the execution has completed
      And the plan titled "Follow-up" names the execution's turn as the one that made it
      And once the execution turned to planning, the model was offered exactly the planning tools

    @R4.9
    Scenario Outline: Another session's plan can be approved while this session's execution runs (<whose>)
      Given the model will take its time to carry out the plan
      And the user approved the plan with permission mode auto
      And while that execution runs, <whose> has a plan awaiting approval
      When the user approves the other session's plan with permission mode auto
      Then the other session's plan is approved with an execution of its own
      When the model finishes its work
      Then the execution has completed

      Examples:
        | whose                                  |
        | another session                        |
        | another session of the same project    |

  Rule: The permission mode decides what asks first, in the execution (§3, project rule P7)

    @P7
    Scenario: With ask, a file change waits for the user's permission
      Given the model will call Write on "notes.txt"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Write
      When the user allows it
      Then the execution has finished
      And the Write call succeeded
      And the project file "notes.txt" contains "written by the model"

    @P7
    Scenario: A file change the user denied leaves no folder behind
      Given the model will call Write on "drafts/notes.txt"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Write
      When the user denies it
      Then the execution has finished
      And the Write call reports that permission was denied
      And the project has no folder "drafts"

    @P7
    Scenario: With ask, an edit waits for the user's permission too
      Given the model will call Edit on "notes.txt"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Edit
      When the user denies it
      Then the execution has finished
      And the Edit call reports that permission was denied
      And the project is as it was before

    @P7
    Scenario: A permission mode chosen after the execution is the one that counts
      Given the user approved the plan with permission mode auto
      And the execution has finished
      And the user set the session's permission mode to ask
      And the model will call Write on "later.txt"
      When the user sends a new request to the agent
      Then the user is asked for permission before Write
      When the user denies it
      Then the agent has finished the request
      And the Write call reports that permission was denied
      And the project is as it was before

    @P7
    Scenario: With ask, a denied file change changes nothing
      Given the model will call Write on "notes.txt"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Write
      When the user denies it
      Then the execution has finished
      And the Write call reports that permission was denied
      And the project is as it was before

    @P7
    Scenario: With ask, every file change asks, also after an earlier one was allowed
      Given the model will call Write on "notes.txt" and afterwards on "more.txt"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Write
      When the user allows it
      Then the user is asked again before the Write on "more.txt"
      When the user denies it
      Then the execution has finished
      And the project file "notes.txt" contains "written by the model"
      And the project has no file "more.txt"

    @P7
    Scenario: With ask, the same file change asks again later in the same turn
      Given the model will call Write on "notes.txt" and afterwards on "notes.txt"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Write
      When the user allows it
      Then the user is asked again before the Write on "notes.txt"
      When the user denies it
      Then the execution has finished
      And the project file "notes.txt" contains "written by the model"

    @P7
    Scenario: With ask, a call whose id the model gives again gets a question of its own
      Given the model will call Write on "notes.txt" twice, giving both calls one id
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Write
      When the user allows it
      Then the user is asked again, under a question of its own
      When the user denies it
      Then the execution has finished
      And the project file "notes.txt" contains "written by the model"

    @P7
    Scenario: With ask, every file change asks, also after an earlier one was denied
      Given the model will call Write on "notes.txt" and afterwards on "more.txt"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Write
      When the user denies it
      Then the user is asked again before the Write on "more.txt"
      When the user allows it
      Then the execution has finished
      And the project has no file "notes.txt"
      And the project file "more.txt" contains "written by the model"

    @P7
    Scenario: With ask, each file change of one message asks on its own
      Given the model will call Write on "notes.txt" and on "more.txt" in one message
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Write
      When the user denies it
      Then the user is asked again, about the other Write
      When the user allows it
      Then the execution has finished
      And the Write allowed ran and the Write denied changed nothing

    @P7
    Scenario: With accept-edits, file changes run without asking
      Given the model will call Write on "notes.txt"
      When the user approves the plan with permission mode accept-edits
      Then the execution has finished
      And the user was not asked for permission
      And the Write call succeeded
      And the project file "notes.txt" contains "written by the model"

    @P7
    Scenario: With accept-edits, commands still ask
      Given the model will run the command "echo ran > ran.txt"
      When the user approves the plan with permission mode accept-edits
      Then the user is asked for permission before Bash
      When the user allows it
      Then the execution has finished
      And the Bash call succeeded
      And the project file "ran.txt" contains "ran"

    @P7
    Scenario: With auto, nothing asks
      Given the model will run the command "echo ran > ran.txt"
      When the user approves the plan with permission mode auto
      Then the execution has finished
      And the user was not asked for permission
      And the Bash call succeeded
      And the project file "ran.txt" contains "ran"

    @C5 @R5.9
    Scenario: A command the execution ran is recorded under the execution's turn
      Given the model will run the command "echo ran > ran.txt"
      When the user approves the plan with permission mode auto
      Then the execution has finished
      And the command the execution ran is recorded for audit under the execution's turn

    @P7
    Scenario: With auto, a script of several lines runs without asking too
      Given the model will run a script of several lines that writes ran.txt
      When the user approves the plan with permission mode auto
      Then the execution has finished
      And the user was not asked for permission
      And the Bash call succeeded
      And the project file "ran.txt" contains "ran"

  Rule: The permission mode still applies after the execution (project rule P7)

    @P7
    Scenario: With ask, a later file change still waits for the user
      Given the user approved the plan with permission mode ask
      And the execution has finished
      And the model will call Write on "later.txt"
      When the user sends a new request to the agent
      Then the user is asked for permission before Write
      When the user denies it
      Then the agent has finished the request
      And the Write call reports that permission was denied
      And the project is as it was before

    @P7
    Scenario: With ask, a later command still waits for the user
      Given the user approved the plan with permission mode ask
      And the execution has finished
      And the model will run the command "echo later > later.txt"
      When the user sends a new request to the agent
      Then the user is asked for permission before Bash
      When the user denies it
      Then the agent has finished the request
      And the Bash call reports that permission was denied
      And the project is as it was before

    @P7
    Scenario: With ask, a command allowed once asks again when a later request runs it
      Given the model will run the command "echo again >> again.txt"
      And the user approved the plan with permission mode ask
      And the host asked permission before Bash
      And the user allowed it
      And the execution has finished
      And the model will run the command "echo again >> again.txt"
      When the user sends a new request to the agent
      Then the user is asked for permission before Bash
      When the user denies it
      Then the agent has finished the request
      And the Bash call reports that permission was denied

    @P7
    Scenario: With ask, a command allowed twice still asks the third time
      Given the user approved the plan with permission mode ask
      And the execution has finished
      And the user allowed the command "echo again >> again.txt" in each of 2 later requests
      And the model will run the command "echo again >> again.txt"
      When the user sends a new request to the agent
      Then the user is asked for permission before Bash
      When the user denies it
      Then the agent has finished the request
      And the Bash call reports that permission was denied

    @P7 @R3.4
    Scenario: A plan approved with ask asks before its command, after an earlier plan ran with auto
      Given the user approved the plan with permission mode auto
      And the execution has finished
      And the user switched the session to Plan mode
      And the model will submit a plan titled "The second plan"
      And the user asked for another plan
      And the revised plan titled "The second plan" is the one awaiting approval
      And the model will run the command "echo second > second.txt"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Bash
      When the user denies it
      Then the execution has finished
      And the Bash call reports that permission was denied
      And the project has no file "second.txt"

    @P7
    Scenario: With accept-edits, a later command still waits for the user
      Given the user approved the plan with permission mode accept-edits
      And the execution has finished
      And the model will run the command "echo later > later.txt"
      When the user sends a new request to the agent
      Then the user is asked for permission before Bash
      When the user denies it
      Then the agent has finished the request
      And the Bash call reports that permission was denied
      And the project is as it was before

    @P7
    Scenario: With accept-edits, a later file change runs without asking
      Given the user approved the plan with permission mode accept-edits
      And the execution has finished
      And the model will call Write on "later.txt"
      When the user sends a new request to the agent
      Then the agent has finished the request
      And the user was not asked for permission
      And the Write call succeeded
      And the project file "later.txt" contains "written by the model"

  Rule: A permission question is answered once (project rule P7)

    @P7
    Scenario: An answered permission question cannot be answered again
      Given the model will call Write on "notes.txt"
      And the user approved the plan with permission mode ask
      And the host asked permission before Write
      When the user denies it
      And the user sends a second answer to the same question, allowing the call
      Then the request is refused with PERMISSION_REQUEST_NOT_FOUND
      And the execution has finished
      And the Write call reports that permission was denied
      And the project has no file "notes.txt"

    @P7
    Scenario: An allowed permission question cannot be answered again with the same answer
      Given the model will call Write on "notes.txt"
      And the user approved the plan with permission mode ask
      And the host asked permission before Write
      When the user allows it
      And the user sends a second answer to the same question, allowing the call
      Then the request is refused with PERMISSION_REQUEST_NOT_FOUND
      And the execution has finished
      And the Write call succeeded

    @P7
    Scenario: A second answer to an answered question leaves the next question waiting
      Given the model will call Write on "notes.txt" and afterwards on "more.txt"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Write
      When the user allows it
      Then the user is asked again before the Write on "more.txt"
      When the user answers the first question again, denying the call
      Then the request is refused with PERMISSION_REQUEST_NOT_FOUND
      And the open question still takes the user's answer, denying the call
      And the execution has finished
      And the project has no file "more.txt"

    @P7
    Scenario: An answer to a question never asked leaves the open question waiting
      Given the model will call Write on "notes.txt"
      And the user approved the plan with permission mode ask
      And the host asked permission before Write
      When the user answers a permission question that was never asked
      Then the request is refused with PERMISSION_REQUEST_NOT_FOUND
      And the open question still takes the user's answer, denying the call
      And the execution has finished
      And the Write call reports that permission was denied
      And the project has no file "notes.txt"

    @P7
    Scenario: A question asked after a restart takes no answer meant for one asked before it
      Given the model will call Write on "notes.txt"
      And the user approved the plan with permission mode ask
      And the host asked permission before Write
      And the host restarted while the question was open
      And the model will call Write on "later.txt"
      When the user sends a new request to the agent
      Then the user is asked for permission before Write
      When the user answers the question asked before the restart, allowing the call
      Then the request is refused with PERMISSION_REQUEST_NOT_FOUND
      And the open question still takes the user's answer, denying the call
      And the agent has finished the request
      And the Write call reports that permission was denied
      And the project has no file "later.txt"

    @P7
    Scenario: An answer to a question that was never asked is refused
      When the user answers a permission question that was never asked
      Then the request is refused with PERMISSION_REQUEST_NOT_FOUND
      And the approval is pending
