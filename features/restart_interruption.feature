@area:restart_interruption
Feature: A restart interrupts, and never replays
  The host keeps an internal boot epoch that it never stores or sends. When a new host
  process starts, it first interrupts everything the previous process left pending, queued
  or running, in one transaction, before it answers any request, and it never runs any of
  that work again. Work that had already finished stays exactly as it was (§4,
  Consequences).

  A host stops either cleanly or by crashing. A crash can only be staged when the host runs
  as a process of its own; those examples are left out, visibly, when the host runs inside
  the harness.

  Only one host serves a data directory at a time: a second one refuses to start and
  leaves the first alone (project rule P17).

  Background:
    Given a connected client

  Rule: A pending approval is interrupted and its session stays in Plan (§4)

    @R4.10 @R4.13
    Scenario Outline: A pending approval is interrupted when the host <stops>
      Given a plan titled "Waiting" is awaiting approval
      When the host <stops>
      Then the first answer after the restart shows the approval interrupted
      And the interruption is recorded with TURN_INTERRUPTED
      And the session stayed in Plan mode
      And the session is idle after the restart

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.10
    Scenario Outline: The pending approvals of every session are interrupted when the host <stops>
      Given a plan titled "Waiting" is awaiting approval
      And another session has a plan awaiting approval
      When the host <stops>
      Then the pending plans of both sessions are interrupted

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.10 @P32
    Scenario: A plan whose deadline passed while the host was down is interrupted, not expired
      Given the host clock was set back an hour
      And a plan titled "Overdue" is awaiting approval
      When the host restarts
      Then the restarted host's clock is past the plan's deadline
      And the first answer after the restart shows the approval interrupted
      And the interruption is recorded with TURN_INTERRUPTED

    @P32
    Scenario: A restarted host's clock starts at the present, not where the last one stood
      Given the host clock was moved two hours ahead
      And a plan titled "Later" is awaiting approval
      When the host restarts
      Then the restarted host's clock reads the present

    @R4.13
    Scenario: After the restart the user can ask for a new plan
      Given a plan titled "Waiting" is awaiting approval
      When the host restarts
      Then the session stayed in Plan mode
      And the user can ask for a new plan

  Rule: A queued or running execution is interrupted and its session stays in Agent (§4, Consequences)

    @R4.10
    Scenario: A plan made between two restarts is interrupted by the second
      Given a plan titled "Before the first restart" is awaiting approval
      And the host restarted
      And the model submitted a new plan titled "Between the restarts"
      When the host restarts
      Then the first answer after the restart shows the approval interrupted
      And the interruption is recorded with TURN_INTERRUPTED
      And the interrupted plan still reads the deadline it was given

    @R4.10 @R4.14 @C8
    Scenario Outline: An execution still waiting in the queue is interrupted when the host <stops>
      Given a plan titled "Queued" is awaiting approval
      And the user approved the plan with permission mode auto, and its execution is still queued
      When the host <stops>
      Then the first answer after the restart shows the execution interrupted
      And the session stayed in Agent mode with permission mode auto
      And the user can start a new turn in Agent mode

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.10
    Scenario Outline: A queued execution and another session's pending plan are both interrupted when the host <stops>
      Given another session has a plan awaiting approval
      And a plan titled "Queued" is awaiting approval
      And the user approved the plan with permission mode auto, and its execution is still queued
      When the host <stops>
      Then the first answer after the restart shows the execution interrupted
      And the other session's plan is interrupted

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.10 @R4.11 @R4.14 @C8
    Scenario Outline: A running execution is interrupted when the host <stops>
      Given a plan titled "Running" is awaiting approval
      And the model will take its time to answer during the execution
      And the user approved the plan with permission mode accept-edits
      And the execution is waiting for the model
      When the host <stops>
      Then the first answer after the restart shows the execution interrupted
      And every turn of the previous process is recorded as ended
      And the session stayed in Agent mode with permission mode accept-edits
      And the session is idle after the restart
      And the user can start a new turn in Agent mode

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.10 @R4.14
    Scenario Outline: An execution that had turned to planning leaves its session in Plan when the host <stops>
      Given a plan titled "Turning" is awaiting approval
      And the model will switch to planning during the execution and then take its time
      And the user approved the plan with permission mode auto
      And the execution, now planning, is waiting for the model
      When the host <stops>
      Then the first answer after the restart shows the execution interrupted
      And the session stayed in Plan mode

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.10 @C5 @subprocess_only
    Scenario: A crash leaves the record of the command it cut short as it was
      Given a plan titled "Append once" is awaiting approval
      And the model will run a command during the execution that appends to a log and keeps running
      And the user approved the plan with permission mode auto
      And the command has written to the log
      When the host crashes and starts again while the command it ran lives on
      Then the record of the command the crash cut short is as it was

  Rule: Finished work stays as it was (§4)

    @R4.10
    Scenario Outline: A plan that was <outcome> is left as it was by a restart
      Given a plan titled "Finished" that was <outcome>
      And another session has a plan awaiting approval
      When the host restarts
      Then the plan is exactly as it was before the restart
      And the other session's plan is interrupted

      Examples:
        | outcome                           |
        | approved and carried out          |
        | rejected                          |
        | left to expire                    |
        | interrupted by an earlier restart |

  Rule: Nothing is replayed after a restart (§4, Consequences)

    @R4.12
    Scenario: An interrupted approval can never be decided
      Given a plan titled "Waiting" is awaiting approval
      When the host restarts
      Then the interrupted approval can be neither approved nor rejected

    @R4.10 @R4.12
    Scenario: A plan interrupted by a restart stays interrupted when its deadline passes
      Given a plan titled "Waiting" is awaiting approval
      And the host restarted
      When 31 minutes pass
      Then the approval is still interrupted with TURN_INTERRUPTED

    @R4.12 @C3
    Scenario: A message whose calls a restart cut short leaves a conversation the model accepts
      Given the project has a file "notes.txt" containing "original"
      And a plan titled "Read, then run" is awaiting approval
      And the model will read "notes.txt" and, in the same message, run a command during the execution that appends to a log and keeps running
      And the user approved the plan with permission mode auto
      And the command has written to the log
      When the host restarts
      Then nothing from before the restart is replayed
      And the project's log holds the one line the command wrote

    @R1.3 @R4.12
    Scenario: After a restart cut a message's calls short, a later turn's calls still reach the model
      Given the project has a file "notes.txt" containing "original"
      And a plan titled "Read, then run" is awaiting approval
      And the model will read "notes.txt" and, in the same message, run a command during the execution that appends to a log and keeps running
      And the user approved the plan with permission mode auto
      And the command has written to the log
      And the host restarted while the command ran
      And the user had the model read "notes.txt" in a new turn
      And the model will answer "Understood."
      When the user sends another prompt
      Then the model was shown that turn's read and its result

    @R4.12 @C3
    Scenario Outline: A command that was running is not run again when the host <stops>
      Given a plan titled "Append once" is awaiting approval
      And the model will run a command during the execution that appends to a log and keeps running
      And the user approved the plan with permission mode auto
      And the command has written to the log
      When the host <stops>
      Then nothing from before the restart is replayed
      And the project's log holds the one line the command wrote

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.12 @R4.11
    Scenario Outline: An answer the model was still giving is not asked for again when the host <stops>
      Given a plan titled "Answering" is awaiting approval
      And the model will begin its answer during the execution and then take its time
      And the user approved the plan with permission mode auto
      And the execution is waiting for the model
      When the host <stops>
      Then the first answer after the restart shows the execution interrupted
      And nothing from before the restart is replayed

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.12 @R4.11
    Scenario Outline: A Plan turn in progress is interrupted, not resumed, when the host <stops>
      Given a session for the project in Plan mode
      And the model is in the middle of a Plan turn
      When the host <stops>
      Then every turn of the previous process is recorded as ended
      And the session is idle after the restart
      And nothing from before the restart is replayed
      And the session stayed in Plan mode

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

  Rule: A prompt the host accepted outlives the process (§1, §4)

    @R1.3
    Scenario Outline: A prompt accepted just before the host <stops> stays in the conversation
      Given a session for the project in Plan mode
      And the user's prompt "Where is the cache configured?" was accepted while the model takes its time
      When the host <stops>
      Then the session's conversation still holds the prompt "Where is the cache configured?"

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.11 @R4.10
    Scenario: A restart that interrupts a turn leaves the session's earlier turn as it ended
      Given a session for the project
      And the user sent the prompt "Run the checks again" and the model answered it
      And the user's prompt "Where is the cache configured?" was accepted while the model takes its time
      When the host restarts
      Then the session's earlier turn is stored as it ended

  Rule: The boot epoch stays inside the process (§4)

    @R4.1
    Scenario: A restart with nothing to recover changes nothing stored
      Given the host holds finished work of every kind
      When the host restarts with nothing left to recover
      Then no stored name speaks of a boot epoch
      And every stored value is as it was before the restart

    @R4.1
    Scenario: A second restart after a recovery changes nothing stored
      Given a session for the project in Plan mode
      And the model is in the middle of a Plan turn
      And the host restarted
      When the host restarts with nothing left to recover
      Then every stored value is as it was before the restart

    @R4.1 @R4.13
    Scenario: A second restart keeps the mode the user chose after a recovery
      Given a plan titled "Waiting" is awaiting approval
      And the host restarted
      And the user switched the session to Agent mode
      When the host restarts with nothing left to recover
      Then every stored value is as it was before the restart

    @P13 @R4.10
    Scenario: A plan file changed while the host was down cannot be opened after the restart
      Given a plan titled "Checked at approval" is awaiting approval
      And the host restarted
      And the plan file is changed on disk after submission
      Then opening the plan is refused with ARTIFACT_MODIFIED

    @R4.2
    Scenario: A restart with nothing to recover changes no answer
      Given the host holds finished work of every kind
      When the host restarts with nothing left to recover
      Then the host answers every read as it did before the restart
      And no message from the host names a boot epoch

  Rule: One record holds an approval and its execution, in the published structure (§4, §7)

    @R7.5
    Scenario: A new database has the published v10 structure
      Given the host holds finished work of every kind
      Then the database has the structure of the published v10 schema

    @R4.3 @R2.6
    Scenario: An approval and its execution are one stored record
      Given a plan titled "Stored" is awaiting approval and the model will carry it out
      When the user approves the plan with permission mode accept-edits
      And the execution has finished
      Then the approval's record keeps the title and the question in their own fields
      And the approval's record holds its execution

  Rule: One host serves a data directory at a time (project rule P17)

    @P17
    Scenario: A second host on the same data directory refuses to start
      Given a plan titled "Mine" is awaiting approval
      When a second host starts on the same data directory
      Then the second host refuses to start with DATA_DIR_IN_USE
      And the second host changed nothing in the data directory
      And the first host still serves, with the plan still awaiting approval

    @P17 @subprocess_only
    Scenario: A host that crashed while a command ran starts again while that command still runs
      Given a plan titled "Append once" is awaiting approval
      And the model will run a command during the execution that appends to a log and keeps running
      And the user approved the plan with permission mode auto
      And the command has written to the log
      When the host crashes and starts again while the command it ran lives on
      Then the restarted host serves the data directory
