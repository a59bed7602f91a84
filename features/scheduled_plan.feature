@area:scheduled_plan
Feature: Scheduled tasks never plan unattended
  Nobody is there to approve a plan when a scheduled task runs, so a task in Plan mode is
  refused before the host does any work for it, whether it is run by hand or its time
  comes. Only a task explicitly changed to Agent runs unattended (§6).

  Unattended runs follow one more rule of this project: a tool call that would need a
  permission answer is refused with PERMISSION_UNAVAILABLE, and the run goes on (P8). A
  deleted task is gone for good: it is not listed, never runs, and cannot be acted on (P26).
  A run the host was in the middle of when it stopped is over: it is recorded as failed and
  never resumed (P28). A task is reported and kept exactly as the user gave it, and a task
  switched off does not run (P29). A run whose model provider fails is a failed run, as its
  turn is (P25).

  Background:
    Given a connected client

  Rule: A Plan task is refused before provider work, artifact, approval or queue entry (§6)

    @R6.1 @R6.2
    Scenario Outline: A Plan task that <starts> is refused before any work
      Given a scheduled task in Plan mode for the project
      And the model would submit a plan if it were asked
      When the task <starts>
      Then the run is refused with PLAN_REQUIRES_INTERACTIVE_SESSION
      And the host did no work for the refused run

      Examples:
        | starts     |
        | is run now |
        | comes due  |

  Rule: Only an explicit change to Agent lets a task run unattended (§6)

    @R6.3
    Scenario Outline: The host never switches a refused task to Agent when it <starts>
      Given a scheduled task in Plan mode for the project
      When the task <starts>
      Then the run is refused with PLAN_REQUIRES_INTERACTIVE_SESSION
      And the task is still in Plan mode
      And running it again is refused the same way

      Examples:
        | starts     |
        | is run now |
        | comes due  |

    @P29
    Scenario: A run works in the project exactly as its task names it
      Given a scheduled task in Agent mode for the project given with a trailing slash
      And the model will answer "The changelog is tidy." for the task
      When the task is run now
      Then the run completes unattended
      And the run's session names the project exactly as the task does

    @R6.3
    Scenario: A task changed to Agent runs unattended
      Given a scheduled task in Plan mode for the project
      And the user changed the task to Agent mode
      And the model will answer "The changelog is tidy." for the task
      When the task is run now
      Then the run completes unattended
      And no plan artifact was written

    @R6.3
    Scenario: A task changed to Agent and to another model runs with that model
      Given a scheduled task in Plan mode for the project
      And the user changed the task to Agent mode and to another model
      And the model will answer "The changelog is tidy." for the task
      When the task is run now
      Then the run completes unattended
      And the run asked the provider for the model the task was changed to

    @R6.3
    Scenario: An Agent task runs when its time comes
      Given a scheduled task in Agent mode for the project
      And the model will answer "The changelog is tidy." for the task
      When the task comes due
      Then the run completes unattended

    @R6.3 @P29
    Scenario: A task changed to Agent after it was given its time runs unattended when that time comes
      Given a scheduled task in Plan mode for the project
      And the task is due in 5 minutes
      And the user changed the task to Agent mode
      And the model will answer "The changelog is tidy." for the task
      When the time the task was due comes
      Then the task ran when its time came

  Rule: A run ends as its turn ended (§6, project rule P25)

    @P25
    Scenario: A run whose model provider answers with an error ends failed
      Given a scheduled task in Agent mode for the project
      And the model provider will refuse the next request
      When the task is run now
      Then the run is recorded as failed, as its turn ended

  Rule: Unattended runs cannot wait for a permission answer (project rule P8)

    @P8
    Scenario Outline: A <tool> call that needs permission in a run asking <permission> is refused
      Given a scheduled task in Agent mode for the project with permission mode <permission>
      And the model will call <tool> during the task and then finish
      When the task is run now
      Then the <tool> call was refused with PERMISSION_UNAVAILABLE
      And the <tool> call did nothing
      And the run went on to completion

      Examples:
        | tool  | permission   |
        | Write | ask          |
        | Bash  | ask          |
        | Bash  | accept-edits |

    @R3.8
    Scenario: A plan the model makes during an Agent task's run is never approved by the run
      Given a scheduled task in Agent mode for the project with permission mode auto
      And the model will switch to planning during the task and submit a plan titled "Planned unattended"
      When the task is run now
      Then the run approved no plan and carried nothing out

    @P8
    Scenario: A call that needs no permission runs in an unattended run
      Given a scheduled task in Agent mode for the project with permission mode accept-edits
      And the model will call Write during the task and then finish
      When the task is run now
      Then the Write call ran
      And the run went on to completion

    @C5 @P8
    Scenario: A command in a scheduled run times out on the host clock
      Given a scheduled task in Agent mode for the project
      And the model will run a waiting command with a one-minute timeout during the task and then finish
      And the task was run and its command has started
      When a minute passes on the host clock
      Then the run's command timed out and the run completed

    @P8 @R5.9
    Scenario: While a run is under way, an interactive session still asks its user
      Given a scheduled task in Agent mode for the project
      And the model will take its time to answer the task
      And the task was run and is waiting for the model
      And a session for the project with permission mode ask
      When the model calls Write in the user's session while the run is under way
      Then the user of that session is asked before the Write runs
      And the run's session shows its turn under way

    @R5.1 @R5.6
    Scenario: A prompt to the session of a run under way is refused as busy
      Given a scheduled task in Agent mode for the project
      And the model will take its time to answer the task
      And the task was run and is waiting for the model
      When the user prompts the run's session while the run is under way
      Then the request is refused with SESSION_BUSY

  Rule: A task is reported and kept as the user gave it (project rule P29)

    @P29
    Scenario: A new task is reported as it was created
      When the user creates a task with every field given
      Then the host reports the task as it was created
      And the task is listed and stored as it was created

    @P29 @R2.8
    Scenario Outline: A task for a project that is not a folder is refused (<root>)
      When the user tries to create a task for <root>
      Then the request is refused with WORKSPACE_INVALID
      And no task was created

      Examples:
        | root                         |
        | a relative path              |
        | a folder that does not exist |
        | a file                       |

    @P29
    Scenario: A new task without a project is reported as it was created
      When the user creates a task without a project, with every other field given
      Then the host reports the task as it was created
      And the task is listed and stored as it was created

    @P29
    Scenario: A task due at the earliest time the schedule allows is reported as it was created
      When the user creates a switched-off task due at the earliest time the schedule allows
      Then the host reports the task as it was created
      And the task is listed and stored as it was created

    @P29
    Scenario: A task due a quarter of an hour after the epoch began is reported as it was created
      When the user creates a switched-off task due 1000000 ms after the epoch began
      Then the host reports the task as it was created
      And the task is listed and stored as it was created

    @P29
    Scenario: Every task is listed, however many there are
      When the user creates 25 tasks for the project
      Then the list of tasks shows every one of them as it was created

    @P29
    Scenario: Every change to a task is reported and kept
      Given a scheduled task in Agent mode for the project
      When the user changes every field of the task
      Then the host reports the task as changed
      And the task is listed and stored as changed

    @P29
    Scenario: A task changed an hour after it was listed is listed as changed and keeps the time it was created
      Given a scheduled task in Agent mode for the project
      And the user read the list of tasks
      And an hour passed on the host clock
      When the user changes every field of the task
      Then the host reports the task as changed, created when it was
      And the task is listed and stored as changed, created when it was

    @P29
    Scenario: A task taken off the schedule is reported and kept without a time
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      When the user takes the task off the schedule
      Then the host reports the task as changed
      And the task is listed and stored as changed

    @P29
    Scenario: A task taken off the schedule does not run at its earlier time
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model would answer "The changelog is tidy." if it were asked
      And the user took the task off the schedule
      When the time the task was first due comes
      Then the task taken off the schedule did not run

    @P29
    Scenario Outline: A refused task stays switched on when it <starts>
      Given a scheduled task in Plan mode for the project
      When the task <starts>
      Then the run is refused with PLAN_REQUIRES_INTERACTIVE_SESSION
      And the task is still switched on

      Examples:
        | starts     |
        | is run now |
        | comes due  |

    @P29
    Scenario: A task run by hand still runs when its time comes
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model will answer "The changelog is tidy." for the task
      And the task was run by hand
      And the model would answer "The changelog is tidy." if it were asked
      When the time the task was due comes
      Then the task ran when its time came

    @P29
    Scenario: A task given a new time after it ran runs again at that time
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model will answer "The changelog is tidy." for the task
      And the task ran when its time came
      And the task is due in 10 minutes
      And the model would answer "Tidy again." if it were asked
      When the time the task was due comes
      Then the task ran when its time came

    @P31
    Scenario: A task's prompt reaches the model exactly as the user gave it
      Given a scheduled task in Agent mode for the project, its prompt framed by blank lines and indentation
      And the model will answer "The changelog is tidy." for the task
      When the task is run now
      Then the model was given the prompt exactly as typed

    @P29
    Scenario: A task's last run stays its own when another task runs later
      Given a scheduled task in Agent mode for the project
      And another scheduled task, which is not run yet
      And the task was run by hand and completed
      When the other task is run by hand a minute later
      Then the task still reports its own run as its last

    @P29
    Scenario: Each task reports its own last run
      Given a scheduled task in Agent mode for the project
      And another scheduled task, which is never run
      And the model will answer "The changelog is tidy." for the task
      When the task is run now
      Then the other task reports no last run

    @P29
    Scenario: A switched-off task does not run when its time comes
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model would answer "The changelog is tidy." if it were asked
      And the user switched the task off
      When the time the task was due comes
      Then the switched-off task did not run

    @P29
    Scenario: A task switched off and on again runs when its time comes
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model will answer "The changelog is tidy." for the task
      And the user switched the task off
      And the user switched the task on again
      When the time the task was due comes
      Then the task ran when its time came

    @P29
    Scenario: A task renamed before its time runs once when its time comes
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model will answer "The changelog is tidy." for the task
      And the user renamed the task
      When the time the task was due comes
      Then the task ran once when its time came

    @P29
    Scenario: Two tasks due at the same time both run when that time comes
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And another scheduled task in Agent mode, due at the same time
      And the model will answer "The changelog is tidy." for each of the two tasks
      When the time the task was due comes
      Then both tasks ran when their time came

    @P29
    Scenario: Six tasks due at the same time all run when that time comes
      Given 6 scheduled tasks in Agent mode for the project, all due in 5 minutes
      And the model will answer "The chore is done." for each of the 6 tasks
      When the time the tasks are due comes
      Then every one of the tasks ran when their time came

    @P29
    Scenario: Two tasks of one name due at the same time both run when that time comes
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And another scheduled task of the same name in Agent mode, due at the same time
      And the model will answer "The changelog is tidy." for each of the two tasks
      When the time the task was due comes
      Then both tasks ran when their time came

    @P29
    Scenario: A task moved to a later time does not run at its earlier time
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model would answer "The changelog is tidy." if it were asked
      And the user moved the task 20 minutes later
      When the time the task was first due comes
      Then the moved task did not run

    @P29
    Scenario: A task moved and switched on in one change does not run at its earlier time
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model would answer "The changelog is tidy." if it were asked
      And the user moved the task 20 minutes later, switching it on again
      When the time the task was first due comes
      Then the moved task did not run

    @P29
    Scenario: A task due weeks ahead does not run when the clock moves on a minute
      Given a scheduled task in Agent mode for the project
      And the task is due in 30 days
      And the model would answer "The changelog is tidy." if it were asked
      When the host clock moves on a minute
      Then the task due weeks ahead did not run

    @P29
    Scenario: A task due weeks ahead does not run after a restart when the clock moves on a minute
      Given a scheduled task in Agent mode for the project
      And the task is due in 30 days
      And the model would answer "The changelog is tidy." if it were asked
      And the host restarted
      When the host clock moves on a minute
      Then the task due weeks ahead did not run

    @P29 @P32
    Scenario: A task does not run a millisecond before its time
      Given a scheduled task in Agent mode for the project
      And the model will answer "Changelog tidied." for the task
      And the task is due at a time that is not a whole second
      When the host clock reaches a millisecond before the task's time
      Then the task has not run yet
      When the host clock reaches the task's time
      Then the task ran at its time, not before

    @P29 @R5.9
    Scenario: A task runs when its time comes while a plan of its project awaits approval
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And a plan titled "Waiting for the user" is awaiting approval
      And the model will answer "The changelog is tidy." for the task
      When the time the task was due comes
      Then the task ran when its time came

    @P29 @P32
    Scenario: A task runs once when the clock goes back and then past its time
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the host clock was set back an hour
      And the model will answer "The changelog is tidy." for the task
      When the time the task was due comes
      Then the task ran once when its time came

    @P29 @P32
    Scenario: A task due in three days runs when the clock jumps a week ahead
      Given a scheduled task in Agent mode for the project
      And the task is due in 3 days
      And the model will answer "The changelog is tidy." for the task
      When the host clock jumps a week ahead
      Then the task ran when its time came

    @P29 @R6.1
    Scenario: A Plan task refused when its time comes does not hold back another task due then
      Given a scheduled task in Plan mode for the project
      And the task is due in 5 minutes
      And another scheduled task in Agent mode, due at the same time
      And the model would answer "Release notes drafted." if it were asked
      When the time the task was due comes
      Then the other task ran when its time came

    @P29
    Scenario: A task without a project runs when its time comes
      Given a scheduled task in Agent mode without a project
      And the task is due in 5 minutes
      And the model will answer "Nothing to tidy here." for the task
      When the time the task was due comes
      Then the task ran when its time came

    @P29
    Scenario: A task keeps its time across a restart
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model will answer "The changelog is tidy." for the task
      When the host restarts
      And the time the task was due comes
      Then the task ran when its time came

    @P29
    Scenario: A task run by hand keeps its time across a restart
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model will answer "The changelog is tidy." for the task
      And the task was run by hand
      And the model would answer "The changelog is tidy." if it were asked
      When the host restarts
      And the time the task was due comes
      Then the task ran when its time came

    @P29
    Scenario: A task due in two days keeps its time across a restart
      Given a scheduled task in Agent mode for the project
      And the task is due in 2 days
      And the model will answer "The changelog is tidy." for the task
      When the host restarts
      And the time the task was due comes
      Then the task ran when its time came

    @P29
    Scenario Outline: A task that ran at its time does not run again when that time comes again (<how>)
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model will answer "The changelog is tidy." for the task
      And the task ran when its time came
      And the model would answer "The changelog is tidy." if it were asked
      And <how>
      When the time the task was due comes
      Then the task that already ran did not run again

      Examples:
        | how                                 |
        | the host restarted                  |
        | the host clock was set back an hour |

    @P29 @P28
    Scenario: A task whose run a restart cut short does not run again when its time comes again
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model will take its time to answer the task
      And the task's time came and its run is waiting for the model
      And the model would answer "The changelog is tidy." if it were asked
      And the host restarted
      When the time the task was due comes
      Then the task whose run the restart cut short did not run again

    @P29
    Scenario: A switched-off task stays off across a restart
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model would answer "The changelog is tidy." if it were asked
      And the user switched the task off
      When the host restarts
      And the time the task was due comes
      Then the switched-off task did not run

    @P29
    Scenario: Tasks due at the same time all run after a restart
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And another scheduled task in Agent mode, due at the same time
      And the model will answer "The changelog is tidy." for each of the two tasks
      When the host restarts
      And the time the later task is due comes
      Then both tasks ran when their time came

    @P29
    Scenario: Tasks due at different times all run after a restart
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And another scheduled task in Agent mode, due 5 minutes later
      And the model will answer "The changelog is tidy." for each of the two tasks
      When the host restarts
      And the time the later task is due comes
      Then both tasks ran when their time came

  Rule: Every run asked for is a run of its own (project rule P35)

    @P35
    Scenario: A task run again while its first run is under way starts a second run
      Given a scheduled task in Agent mode for the project
      And the model will take its time to answer the task
      And the task was run and is waiting for the model
      And the model will answer "Done again." for the task
      When the task is run again by hand
      Then the second run is a run of its own, in a session of its own, and it completes

    @P35 @R5.9
    Scenario: Cancelling one of two runs of a task leaves the other to finish
      Given a scheduled task in Agent mode for the project
      And the model will take its time to answer the task
      And the task was run and is waiting for the model
      And the model will take its time to answer the task
      And the task was run again and is waiting for the model
      When the user cancels the first run's turn
      Then the other run goes on, and completes once the model answers

    @P29
    Scenario: The task list shows how a run ended, also when it was read while the run was under way
      Given a scheduled task in Agent mode for the project
      And the model will take its time to answer the task
      And the task was run and is waiting for the model
      And the user read the task list while the run was under way
      When the model answers the run
      Then the task list shows the run completed

    @P35
    Scenario: A task whose run failed runs again when asked, as a new run
      Given a scheduled task in Agent mode for the project
      And the task's run failed because the model provider answered with an error
      And the model will answer "Done again." for the task
      When the task is run again by hand
      Then the second run is a run of its own, in a session of its own, and it completes

    @P35
    Scenario: A run whose turn is cancelled ends failed
      Given a scheduled task in Agent mode for the project
      And the model will take its time to answer the task
      And the task was run and is waiting for the model
      When the user cancels the run's turn
      Then the run is recorded as failed, as its cancelled turn ended

    @R7.2
    Scenario: The session a run created is announced as it reads once the run has ended
      Given a scheduled task in Agent mode for the project
      And the model will answer "The changelog is tidy." for the task
      When the task is run now
      Then the run's session was announced as it reads once the run has ended

    @P8 @P7
    Scenario: Once its run has ended, the session a run created asks its user like any session
      Given a scheduled task in Agent mode for the project with permission mode ask
      And the model will answer "The changelog is tidy." for the task
      And the task was run by hand
      When the user prompts the run's session, whose model asks to run a command
      Then the run's session asks the user for permission, as any session does

    @R5.6
    Scenario Outline: Once its run has ended, the session a run created takes a change of <setting>
      Given a scheduled task in Agent mode for the project
      And the model will answer "The changelog is tidy." for the task
      And the task was run by hand
      When the user changes the <setting> of the run's session
      Then the session has the new <setting>

      Examples:
        | setting         |
        | mode            |
        | permission mode |

  Rule: A deleted task is gone for good (project rule P26)

    @P26
    Scenario: A deleted task is no longer listed
      Given a scheduled task in Agent mode for the project
      When the user deletes the task
      Then the task is no longer listed

    @P26 @P29
    Scenario Outline: Deleting a task leaves another task's time armed (<which>)
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And another scheduled task <which> in Agent mode, due at the same time
      And the model would answer "Release notes drafted." if it were asked
      And the user deleted the task
      When the time the task was due comes
      Then the other task ran when its time came

      Examples:
        | which               |
        | of another name     |
        | of the same name    |

    @P26
    Scenario: A deleted task never runs when its time comes
      Given a scheduled task in Agent mode for the project
      And the task is due in 5 minutes
      And the model would answer "The changelog is tidy." if it were asked
      And the user deleted the task
      When the time the task was due comes
      Then the deleted task did not run

    @P26
    Scenario Outline: Acting on a deleted task is refused (<action>)
      Given a scheduled task in Agent mode for the project
      And the user deleted the task
      When the user tries to <action> the deleted task
      Then the request is refused with TASK_NOT_FOUND
      And the deleted task did not run
      And the task is no longer listed

      Examples:
        | action |
        | run    |
        | change |
        | delete |

  Rule: A run cut short by a restart is over, never resumed (project rule P28)

    @P28 @R4.11
    Scenario Outline: A run under way when the host <stops> is recorded as failed
      Given a scheduled task in Agent mode for the project
      And the model will take its time to answer the task
      And the task was run and is waiting for the model
      When the host <stops>
      Then the task's last run is recorded as failed with TURN_INTERRUPTED
      And every turn of the previous process is recorded as ended
      And the task runs again only when it is asked to, as a new run

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

  Rule: Outside conformance mode the host keeps time by the system clock (project rule P33)

    @P33
    Scenario: Outside conformance mode a task runs on its own when its time comes
      Given the host runs as in production, without conformance mode
      And the model will answer "Changelog tidied." for the task
      And a scheduled task in Agent mode for the project, due in a moment by the system clock
      Then the task ran on its own when the system clock reached its time
