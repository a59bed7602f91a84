@area:restart_interruption
Feature: A restart interrupts, and never replays
  The host keeps an internal boot epoch that it never stores or sends. When a new host
  process starts, it first interrupts everything the previous process left pending, queued
  or running, in one transaction, before it answers any request, and it never runs any of
  that work again (§4, Consequences).

  Examples of how a host stops are a clean restart and a crash (SIGKILL). A crash can only
  be staged with the subprocess driver, so those examples carry @subprocess_only and are
  left out, visibly, under the in-process driver.

  Background:
    Given a connected client

  Rule: A pending approval is interrupted and its session stays in Plan (§4)

    @R4.10 @R4.13
    Scenario Outline: A pending approval is interrupted by a restart (<stops>)
      Given a plan titled "Waiting" is awaiting approval
      When the host <stops>
      Then the first answer after the restart shows the approval interrupted
      And the session is in Plan mode
      And the session is idle after the restart
      And the interrupted approval cannot be approved

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

  Rule: A queued or running execution is interrupted and its session stays in Agent (§4)

    @R4.10 @R4.14 @C8
    Scenario Outline: An approved execution still in the queue is interrupted (<stops>)
      Given a plan titled "Queued" is awaiting approval
      And the host will hold the next approved execution in the queue
      And the user approved the plan with permission mode auto
      When the host <stops>
      Then the first answer after the restart shows the execution interrupted
      And the session is in Agent mode with permission mode auto
      And the user can start a new turn in Agent mode

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.10 @R4.11 @R4.14 @C8
    Scenario Outline: A running execution is interrupted (<stops>)
      Given a plan titled "Running" is awaiting approval
      And the model will take its time to answer during the execution
      And the user approved the plan with permission mode auto
      And the execution is waiting for the model
      When the host <stops>
      Then the first answer after the restart shows the execution interrupted
      And every turn of the previous process is recorded as ended
      And the session is in Agent mode with permission mode auto
      And the session is idle after the restart

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

  Rule: Nothing is replayed after a restart (§4, Consequences)

    @R4.12 @C3
    Scenario Outline: A command that was running is not run again (<stops>)
      Given a plan titled "Append once" is awaiting approval
      And the model will run the command "echo once >> log.txt; echo started; sleep 1000"
      And the user approved the plan with permission mode auto
      And the command has printed "started"
      When the host <stops>
      Then nothing from before the restart is replayed
      And the project file "log.txt" has exactly 1 line

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R4.12 @R4.11
    Scenario Outline: A half-streamed answer is not asked for again (<stops>)
      Given a plan titled "Streaming" is awaiting approval
      And the model will stream "Working on step one" and then take its time
      And the user approved the plan with permission mode auto
      And the execution has streamed "Working on step one"
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
    Scenario Outline: A Plan turn in progress is interrupted, not resumed (<stops>)
      Given a session for the project in Plan mode
      And the model is in the middle of a Plan turn
      When the host <stops>
      Then every turn of the previous process is recorded as ended
      And the session is idle after the restart
      And nothing from before the restart is replayed
      And the session is in Plan mode

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

  Rule: The boot epoch is internal (§4)

    @R4.1 @R4.3 @R7.5
    Scenario: The stored schema is the published one, without an epoch
      Given a plan titled "Stored" is awaiting approval
      When the host restarts
      Then the database schema is exactly the published v10 schema
      And no stored column names a boot epoch
      And no stored setting names a boot epoch

    @R4.2
    Scenario: No message carries the epoch
      Given a plan titled "Announced" is awaiting approval
      And the model will answer "The plan is carried out."
      And the user approved the plan with permission mode auto
      When the host restarts
      Then no message from the host carries a boot epoch
