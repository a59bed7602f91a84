@area:shell
Feature: Shells and streamed commands
  Commands run through the shell the user chose, stream their output while they run, and
  end together with everything they started, whether they finish, time out or are
  cancelled. Every command is audited (§5, §7, Consequences).

  The host announces its shells, each with a kind; the scenarios use the host's POSIX shell
  and its bash shell, whatever their ids. The host also announces how much output a command
  may stream before it is cut (project rules P19 and P20).

  Background:
    Given a connected client

  Rule: The default shell is a persisted setting (§7)

    @R7.6
    Scenario: The catalog lists the machine's shells with stable ids
      Then every shell in the catalog has a stable id, an absolute path and a kind

    @R7.6
    Scenario Outline: The default shell survives a restart (the host <stops>)
      Given the user chose a new default shell
      When the host <stops>
      Then the chosen default shell is still the default
      And a command now runs in the chosen default shell

      Examples:
        | stops    |
        | restarts |

      @subprocess_only
      Examples:
        | stops                    |
        | crashes and starts again |

    @R7.6
    Scenario: The latest of two choices of the default survives a restart
      Given the user made the POSIX shell the default shell
      And the user made the bash shell the default shell
      When the host restarts
      Then the chosen default shell is still the default
      And a command now runs in the chosen default shell

    @R7.6
    Scenario: The default shell can be changed while a session that follows it is busy
      Given a session for the project with permission mode auto
      And a turn is running in that session
      When the user chooses another default shell
      Then the chosen shell is the default shell

    @R7.6
    Scenario: An unknown default shell is refused
      When the user tries to make "no-such-shell" the default shell
      Then the request is refused with SHELL_NOT_FOUND
      And the default shell is unchanged

  Rule: Commands run through the selected shell (§7)

    @R7.3 @R7.6
    Scenario Outline: A command runs in the default shell when that is the <kind> shell
      Given the user made the <kind> shell the default shell
      And a session for the project with permission mode auto
      When the model runs a command that reveals its shell
      Then the command ran in the <kind> shell

      Examples:
        | kind  |
        | POSIX |
        | bash  |

    @R7.3
    Scenario: The session's shell wins over the default
      Given the user made the bash shell the default shell
      And a session for the project with permission mode auto, using the POSIX shell
      When the model runs a command that reveals its shell
      Then the command ran in the POSIX shell

    @R7.3
    Scenario: A session whose shell of its own is cleared runs commands in the default shell
      Given the user made the bash shell the default shell
      And a session for the project with permission mode auto, using the POSIX shell
      When the user clears the session's own choice of shell
      And the model runs a command that reveals its shell
      Then the session has no shell of its own
      And the command ran in the bash shell

    @R7.3 @R7.6
    Scenario: A session without a shell of its own uses the default, whatever another session of its project chose
      Given the user made the POSIX shell the default shell
      And another session of the project uses the bash shell
      And a session for the project with permission mode auto
      When the model runs a command that reveals its shell
      Then the command ran in the POSIX shell

    @R7.3 @R7.6
    Scenario: A session without a shell of its own follows a change of the default
      Given the user made the POSIX shell the default shell
      And a session for the project with permission mode auto
      And the session already ran a command that revealed its shell
      When the user makes the bash shell the default shell
      And the model runs a command that reveals its shell
      Then the command ran in the bash shell

  Rule: The shell cannot change while a turn runs (§5)

    @R5.4
    Scenario: Choosing another shell while a turn runs is refused
      Given a session for the project with permission mode auto, using the POSIX shell
      And a turn is running in that session
      When the user tries to choose the bash shell for the session
      Then the request is refused with SESSION_BUSY
      And the session still uses the POSIX shell

  Rule: Output streams in order while the command runs (§7, project rule P20)

    @R7.3
    Scenario: Output arrives while the command is still running
      Given a session for the project with permission mode auto
      When the model runs a command that prints a line and then waits
      Then the line arrived while the command was still running

    @R7.3 @P20
    Scenario: Standard output and standard error stream apart, in order
      Given a session for the project with permission mode auto
      When the model runs a command that writes to both streams and exits with code 3
      Then its output streamed in order with stdout and stderr apart
      And the command exited with code 3

    @P20
    Scenario: A line longer than 64 KiB arrives whole
      Given a session for the project with permission mode auto
      When the model runs a command that prints a line longer than 64 KiB
      Then the output is one line of 70000 characters in chunks of at most 16384

    @P20
    Scenario Outline: Output that is not UTF-8 is shown with replacement characters (<bytes>)
      Given a session for the project with permission mode auto
      When the model runs a command that prints <bytes>
      Then the output shows a replacement character before "ok"

      Examples:
        | bytes                                          |
        | bytes that are not UTF-8                       |
        | a byte that continues no character, on its own |

    @R7.3 @P20
    Scenario: Carriage returns in the output arrive as the command printed them
      Given a session for the project with permission mode auto
      When the model runs a command that prints carriage returns
      Then the output and the model's result hold the carriage returns as printed

    @P20
    Scenario Outline: A character whose bytes arrive apart is shown whole (<character>)
      Given a session for the project with permission mode auto
      When the model runs a command that prints <character>
      Then the output shows "<text>" whole

      Examples:
        | character                                        | text |
        | a character in two pieces                        | éok  |
        | a three-byte character cut after its second byte | €ok  |
        | a four-byte character cut after its third byte   | 🚀ok |

    @R7.3 @P20
    Scenario: A NUL character in the output arrives as the command printed it
      Given a session for the project with permission mode auto
      When the model runs a command that prints a NUL character
      Then the output and the model's result hold the NUL character as printed

    @P20
    Scenario: Output exactly at the announced cap is streamed whole
      Given a session for the project with permission mode auto
      When the model runs a command whose output is exactly the host's output cap
      Then the output was streamed whole and not marked truncated


    @R7.3
    Scenario: A shell ended by a signal reports that signal
      Given a session for the project with permission mode auto
      When the model runs a command whose shell is ended by signal 9
      Then the command ended by signal 9

    @R7.3
    Scenario Outline: A shell that exits with status <status> reports that status, not a signal
      Given a session for the project with permission mode auto
      When the model runs a command whose shell exits with status <status>
      Then the command exited with code <status>

      Examples:
        | status |
        | 130    |
        | 255    |

    @P20
    Scenario Outline: Output past the announced cap is cut there (<size>)
      Given a session for the project with permission mode auto
      When the model runs a command whose output is <size> the host's output cap
      Then the output was cut at the cap and marked truncated

      Examples:
        | size                  |
        | one byte over         |
        | eight kibibytes over  |

    @P20
    Scenario: Output of characters of several bytes is cut at the cap in bytes
      Given a session for the project with permission mode auto
      When the model runs a command whose output of two-byte characters passes the host's output cap in bytes, not in characters
      Then the output was cut at the cap in bytes and marked truncated

    @P20
    Scenario: Both streams count towards one cap
      Given a session for the project with permission mode auto
      When the model runs a command whose two streams together pass the host's output cap
      Then the output of both streams together stayed within the cap

    @P20
    Scenario: Output that crosses the cap inside one piece is cut at the cap
      Given a session for the project with permission mode auto
      When the model runs a command whose numbered lines stop just short of the host's output cap on one stream and go on past it on the other
      Then no output past the cap was streamed, whatever notice the host added

    @P20
    Scenario: The cap counts each command's own output, not the turn's
      Given a session for the project with permission mode auto
      When the model runs two commands one after the other in one turn, each printing two thirds of the host's output cap
      Then the output of each command was streamed whole and not marked truncated

    @P20
    Scenario: Each command of a turn numbers its output from 0
      Given a session for the project with permission mode auto
      When the model runs two commands one after the other in one turn
      Then the output of each command is numbered from 0

  Rule: A command ends together with everything it started (Consequences, project rule P19)

    @P19
    Scenario Outline: A process left <behind> ends when its command exits
      Given a session for the project with permission mode auto
      When the model runs a command that leaves a process <behind> and exits
      Then no process the command started is alive when its turn ends

      Examples:
        | behind                    |
        | in the background         |
        | in a session of its own   |
        | behind a double fork      |
        | ignoring requests to stop |

    @P19 @C5
    Scenario Outline: A process left <behind> ends when its command times out
      Given a session for the project with permission mode auto
      When the model runs a command that leaves a process <behind> and waits, with a timeout of 2000 ms
      And 2 seconds pass on the host clock
      Then the command timed out with a COMMAND_TIMED_OUT error
      And no process the command started is alive when its turn ends

      Examples:
        | behind                    |
        | in the background         |
        | in a session of its own   |
        | behind a double fork      |
        | ignoring requests to stop |

    @C5
    Scenario: The second command of a message counts its timeout from its own start
      Given a session for the project with permission mode auto
      When the model runs two commands in one message, each with a one-minute timeout, the first waiting until told
      And 50 seconds pass on the host clock
      And the first command is told to end and the second has started
      And the host clock reaches 30 seconds after the second command's own start
      Then the second command is still running, its own minute not yet over

    @C5 @P32
    Scenario: A command outlasting its timeout in real time runs on while the host clock stands still
      Given a session for the project with permission mode auto
      When the model runs a half-second command with a timeout of 200 ms
      Then the command ran to its end, its timeout not reached on the host clock

    @C5 @P32
    Scenario: A command times out when the clock is set past its timeout
      Given a session for the project with permission mode auto
      When the model runs a command that leaves a process in the background and waits, with a timeout of 2000 ms
      And the host clock is set 2 seconds ahead
      Then the command timed out with a COMMAND_TIMED_OUT error

    @P19
    Scenario Outline: A process left <behind> ends when the host stops
      Given a session for the project with permission mode auto
      When the model runs a command that leaves a process <behind> and waits
      And the host stops while the command runs
      Then no process the command started outlives the host

      Examples:
        | behind                  |
        | in the background       |
        | in a session of its own |
        | behind a double fork    |

    @P19 @C5
    Scenario Outline: A process left <behind> ends when the turn is cancelled
      Given a session for the project with permission mode auto
      When the model runs a command that leaves a process <behind> and waits
      And the user cancels the turn that runs the command
      Then the turn ended as cancelled, and the command with it
      And no process the command started is alive when its turn ends

      Examples:
        | behind                    |
        | in the background         |
        | in a session of its own   |
        | behind a double fork      |
        | ignoring requests to stop |

    @C5
    Scenario Outline: A command's timeout counts from the command's own start (<timeout> ms)
      Given a session for the project with permission mode ask
      When the model runs a command with a timeout of <timeout> ms, after the user took 10 seconds to allow it
      And <just before> milliseconds pass on the host clock
      Then the command is still running
      When one more millisecond passes on the host clock
      Then the command timed out with a COMMAND_TIMED_OUT error

      Examples:
        | timeout | just before |
        | 90500   | 90499       |
        | 3600000 | 3599999     |

    @P9
    Scenario: A command whose project folder is gone gets an error result, and the turn goes on
      Given a session for the project with permission mode auto
      And the project folder has been deleted
      And the model will run the command "echo hello"
      When the user sends a prompt
      Then the command's call got an error result, ran nothing, and the turn went on

  Rule: Every command is audited (Consequences)

    @C5
    Scenario: A command that exits is recorded for audit
      Given a session for the project with permission mode auto
      When the model runs a command that writes to both streams and exits with code 3
      Then the command is recorded for audit

    @C5
    Scenario: A command runs in the project's path exactly as the session was given it
      Given a session for the project, its path given with a trailing slash, with permission mode auto
      When the model runs a command that writes to both streams and exits with code 3
      Then the command is recorded for audit

    @C5
    Scenario: A command run in the session's own shell is recorded with that shell
      Given the user made the POSIX shell the default shell
      And a session for the project with permission mode auto, using the bash shell
      When the model runs a command that reveals its shell
      Then the command ran in the bash shell
      And the command is recorded for audit

    @C5 @R5.9
    Scenario: A command in the session's second turn is recorded under that turn
      Given a session for the project with permission mode auto
      And the model ran a command that writes to both streams and exits with code 3
      When the model runs a command that writes to both streams and exits with code 3
      Then the command is recorded for audit

    @C5 @R5.1
    Scenario: A session's next command runs after a cancelled one
      Given a session for the project with permission mode auto
      And the user cancelled a turn whose command was still running
      When the model runs a command that writes to both streams and exits with code 3
      Then the command is recorded for audit

    @C5
    Scenario: A command run in a Plan turn is recorded for audit
      Given a session for the project in Plan mode with permission mode auto
      When the model runs a command that writes to both streams and exits with code 3
      Then the command is recorded for audit

    @C5 @R4.1
    Scenario: A command after a restart is recorded beside the one before it
      Given a session for the project with permission mode auto
      And the model ran a command that writes to both streams and exits with code 3
      And the host restarted
      When the model runs a command that writes to both streams and exits with code 3
      Then the command is recorded for audit
      And the command before the restart is still recorded for audit as it was

    @C5
    Scenario: A command that times out is recorded for audit
      Given a session for the project with permission mode auto
      When the model runs a command that leaves a process in the background and waits, with a timeout of 2000 ms
      And 2 seconds pass on the host clock
      Then the command timed out with a COMMAND_TIMED_OUT error
      And the command is recorded for audit

    @C5
    Scenario: A command whose turn is cancelled is recorded for audit
      Given a session for the project with permission mode auto
      When the model runs a command that leaves a process in the background and waits
      And the user cancels the turn that runs the command
      Then the turn ended as cancelled, and the command with it
      And the command is recorded for audit
