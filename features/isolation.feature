@area:isolation
Feature: Sessions are isolated from each other
  Each session works in its own project, hears only its own events and decides only its own
  plans, also while other sessions are busy (§5).

  Background:
    Given a connected client
    And a session for the project
    And a second session for another project that keeps a secret

  Rule: One session cannot reach another session's project (§5)

    @R5.8
    Scenario Outline: Reading another project's file is refused (<path>)
      Given the second session is busy with a turn of its own
      And the model will read the other project's secret <path>
      When the user talks to the agent
      Then the read did not succeed
      And the other project's secret reached neither the model nor any message from the host
      And the second session's turn is still running

      Examples:
        | path                                  |
        | by its absolute path                  |
        | by a path climbing out of the project |
        | through a link inside the project     |

    @R5.8
    Scenario Outline: Writing into another project is refused (<path>)
      Given the second session is busy with a turn of its own
      And the session acts without asking first
      And the model will write a file into the other project <path>
      When the user talks to the agent
      Then the write did not succeed
      And nothing in the other project changed
      And the second session's turn is still running

      Examples:
        | path                                  |
        | by its absolute path                  |
        | by a path climbing out of the project |
        | through a link inside the project     |

    @R5.8
    Scenario Outline: A search of the project does not follow a link into another project (<tool>)
      Given the second session is busy with a turn of its own
      And the project has a folder linked to the other project
      And the model will search the project with <tool> for the other project's secret
      When the user talks to the agent
      Then the other project's secret reached neither the model nor any message from the host
      And the second session's turn is still running

      Examples:
        | tool |
        | Grep |
        | Glob |

    @R5.8
    Scenario: A search of the project does not read through a file linked into another project
      Given the second session is busy with a turn of its own
      And the project has a file linked to the other project's secret
      And the model will search the project with Grep for the other project's secret
      When the user talks to the agent
      Then the other project's secret reached neither the model nor any message from the host
      And the second session's turn is still running

  Rule: Events and actions belong to their own session (§5)

    @R5.8 @R5.9
    Scenario: Files alike in name, size and time in two projects are each read as their own
      Given the project has a file "notes.txt" containing "The first project's notes."
      And a session for the project
      And a second session for another project whose "notes.txt" is alike in name, size and time
      And the model will read "notes.txt" and then answer
      And the user sent a prompt
      When the model of the other session reads "notes.txt"
      Then the other session's model was given its own project's "notes.txt"

    @R5.9
    Scenario: Two sessions answering at once each hear only their own turn
      Given the model will answer each session in its own words, slowly
      When the user prompts both sessions
      And the model finishes both answers
      Then every notification names the session the user prompted for its turn
      And each session's answer reached only that session

    @R5.9 @P7
    Scenario: Two sessions asking for permission at once each get their own answer
      Given the model will ask to write a file in each session
      When the user prompts both sessions
      And both sessions ask for permission
      And the user allows the question of the first session
      Then the first session's write ran and the second session's question still waits

    @R5.9 @P7
    Scenario: Two sessions asking for permission at once each get their own question when the models name their calls alike
      Given the model will ask to write a file in each session, naming both calls alike
      When the user prompts both sessions
      And both sessions ask for permission
      And the user allows the question of the first session
      Then the first session's write ran and the second session's question still waits

    @R5.9
    Scenario: Two sessions running commands at once each hear only their own output
      Given both sessions run commands without asking
      And the model will run a command in each session, the first printing again when told
      When the user prompts both sessions
      And both commands run and the first prints again
      Then each command's output named its own session

    @R5.8 @R7.3
    Scenario: Two sessions running commands at once each run them in their own project
      Given both sessions run commands without asking
      And the model will run a command in each session, the first printing again when told
      When the user prompts both sessions
      And both commands run and the first prints again
      Then each command ran in its own session's project

    @R5.9
    Scenario: Cancelling one session's turn leaves another session's command running
      Given both sessions run commands without asking
      And the model will run a command in each session, the first printing again when told
      And the user prompts both sessions
      And both commands run and the first prints again
      When the user cancels the first session's turn
      Then the second session's command still runs

    @R5.9 @C5
    Scenario: A command that ends leaves another session's command timeout armed
      Given both sessions run commands without asking
      And the model will run a command with a one-minute timeout in each session, the first ending when told
      And the user prompts both sessions
      And both commands run and the first prints again
      When the first session's command ends by itself
      And a minute passes on the host clock
      Then the second session's command timed out

    @R5.9 @C5
    Scenario: Cancelling one session's turn leaves another session's command timeout armed
      Given both sessions run commands without asking
      And the model will run a command with a one-minute timeout in each session, the first ending when told
      And the user prompts both sessions
      And both commands run and the first prints again
      When the user cancels the first session's turn
      And a minute passes on the host clock
      Then the second session's command timed out

    @R5.9 @P7
    Scenario: Cancelling one session's turn leaves another session's question open
      Given the model will ask to write a file in each session
      And the user prompts both sessions
      And both sessions ask for permission
      When the user cancels the first session's turn
      Then the second session's question still takes the user's answer

    @R5.9
    Scenario: A turn that fails in one session leaves another session's command running
      Given both sessions run commands without asking
      And the model will run a command in each session, the first ending when told, and the provider will then refuse the first session's next request
      And the user prompts both sessions
      When both commands run, the first ends, and the first session's turn fails
      Then the second session's command still runs

    @R5.9
    Scenario: A turn that fails in one session leaves another session's question open
      Given the model will ask to write a file in each session, and the provider will then refuse the first session's next request
      And the user prompts both sessions
      And both sessions ask for permission
      When the user allows the first session's write, and its turn then fails
      Then the second session's question still takes the user's answer

    @R5.9 @P10
    Scenario: A new context in one session leaves another session's conversation whole
      Given another session is open for the same project
      And the user had a conversation with the agent in the other session
      And the model will start a new context summarised as "Summary: the cache is slow" and then answer
      And the user sent a prompt
      When the user talks to the agent in the other session
      Then the other session's model still saw its own conversation

    @R5.9 @R1.3
    Scenario: Two sessions of one project keep their conversations apart
      Given the user had a conversation with the agent
      And another session is open for the same project
      When the user talks to the agent in the other session
      Then the other session's model saw none of the first session's conversation

    @R5.9
    Scenario: Cancelling one session leaves the other's turn running
      Given both sessions are busy with a turn
      When the user cancels the second session's turn
      Then the second session's turn ended as cancelled
      And the first session's turn is still running
      And once the model answers, the first session's turn completes

    @R5.9
    Scenario: Cancelling one of two sessions of a project leaves the other's turn running
      Given another session is open for the same project
      And both sessions are busy with a turn
      When the user asks to cancel the first session's turn
      Then the second session's turn is still running
      And the first session's turn ended as cancelled

    @R5.9
    Scenario: A session asks for its own model when another session of its project changed model
      Given another session is open for the same project
      And the other session was changed to another model
      And the model will answer "The first session's model answers."
      When the user talks to the agent
      Then the provider was asked for the first session's own model

    @R5.9
    Scenario: A session asks for its own model after another session of its project talked on another model
      Given another session is open for the same project
      And the other session was changed to another model
      And the other session talked to the agent on its model
      And the model will answer "The first session's model answers."
      When the user talks to the agent
      Then the provider was asked for the first session's own model

    @R4.5 @R5.9
    Scenario: Two sessions' executions under way at once each end their own
      Given another session has a plan awaiting approval
      And a plan titled "Mine" is awaiting approval
      And this session's execution will run a command that waits for a word, and the other session's will wait for the model
      And the user approved the plan with permission mode auto
      And this session's execution is running its command
      And the other session's plan was approved, and its execution is waiting for the model
      When the command of this session's execution gets its word
      Then once this session's execution has ended, the other session's execution is still running, and it completes once the model answers

    @R5.9
    Scenario Outline: A plan cannot be <done> through another session
      Given a plan titled "Mine" is awaiting approval
      When the user tries to <action> the plan through the second session
      Then the request is refused with APPROVAL_NOT_FOUND
      And the plan still awaits the user's decision
      And the second session is unchanged

      Examples:
        | action  | done     |
        | approve | approved |
        | reject  | rejected |
        | open    | opened   |
        | read    | read     |

    @R5.9
    Scenario Outline: A plan its own session has read and opened still cannot be <done> through another session
      Given a plan titled "Mine" is awaiting approval
      And the user read and opened the plan through its own session
      When the user tries to <action> the plan through the second session
      Then the request is refused with APPROVAL_NOT_FOUND
      And the plan still awaits the user's decision
      And the second session is unchanged

      Examples:
        | action  | done     |
        | approve | approved |
        | reject  | rejected |
        | open    | opened   |
        | read    | read     |

    @R5.9
    Scenario: Another session of the same project does not list the plans of the first
      Given a plan titled "Mine" is awaiting approval
      And another session is open for the same project
      When the user lists the plans of the other session
      Then the other session lists no plan

    @R5.9
    Scenario: Another session's plans are not listed
      Given a plan titled "Mine" is awaiting approval
      When the user lists the plans of the second session
      Then the second session lists no plan

    @R5.9 @P25
    Scenario: A model answer that breaks off in one session leaves another session's model answering
      Given the second session is busy with a turn whose answer takes its time
      And the model's answer will stop short, its connection cut
      When the user tries to talk to the agent
      Then the turn ended failed with PROVIDER_ERROR
      And once its model answers, the second session's turn completes with that answer

  Rule: A plan cannot be reached through a session the host does not have (project rule P34)

    @P34
    Scenario Outline: A plan cannot be <done> through a session the host never made
      Given a plan titled "Mine" is awaiting approval
      When the user tries to <action> the plan through a session the host never made
      Then the request is refused with SESSION_NOT_FOUND or APPROVAL_NOT_FOUND
      And the plan still awaits the user's decision
      And nothing the host holds has changed

      Examples:
        | action  | done     |
        | approve | approved |
        | reject  | rejected |
        | open    | opened   |
        | read    | read     |
