@area:shell
Feature: Shells and streamed commands
  Commands run through the shell the user chose, stream their output while they run, and
  end together with everything they started, whether they finish, time out or are
  cancelled. Every command is audited (§5, §7, Consequences).

  Background:
    Given a connected client
    And the machine has the shell sh

  Rule: The default shell is a persisted setting (§7)

    @R7.6
    Scenario: The catalog lists the machine's shells with stable ids
      Then every shell in the catalog has a stable id and an absolute path

    @R7.6
    Scenario: The default shell survives a restart
      Given a session for the project
      And the machine has the shell bash
      And the user made bash the default shell
      When the host restarts
      Then the default shell is bash

    @R7.6
    Scenario: An unknown default shell is refused
      When the user tries to make "no-such-shell" the default shell
      Then the request is refused with SHELL_NOT_FOUND

  Rule: Commands run through the selected shell (§7)

    @R7.3 @R7.6
    Scenario: A command runs in the default shell
      Given the machine has the shell bash
      And the user made bash the default shell
      And a session for the project with permission mode auto
      And the model will run the command "readlink /proc/$$/exe; true"
      When the user sends a prompt
      Then the command ran in the shell bash

    @R7.3
    Scenario: The session's shell wins over the default
      Given the machine has the shell bash
      And the user made bash the default shell
      And a session for the project with permission mode auto
      And the session uses the shell sh
      And the model will run the command "readlink /proc/$$/exe; true"
      When the user sends a prompt
      Then the command ran in the shell sh

  Rule: Output streams in order while the command runs (§7)

    @R7.3 @C5
    Scenario: Standard output and standard error stream apart, in order
      Given a session for the project with permission mode auto
      And the model will run the command "echo 'out 1'; echo 'err 1' >&2; echo 'out 2'; exit 3"
      When the user sends a prompt
      Then its output streamed in order with stdout and stderr apart
      And the command exited with code 3
      And the command is recorded for audit

    @R7.3
    Scenario: A line longer than 64 KiB arrives whole
      Given a session for the project with permission mode auto
      And the model will run the command "head -c 70000 /dev/zero | tr '\0' b; echo"
      When the user sends a prompt
      Then the command's output is one line of 70000 characters

    @R7.3
    Scenario: Output that is not UTF-8 is shown with replacement characters
      Given a session for the project with permission mode auto
      And the model will run the command "printf '\377ok\n'"
      When the user sends a prompt
      Then the command's output shows a replacement character before "ok"

    @R7.3
    Scenario: Very large output is capped
      Given a session for the project with permission mode auto
      And the model will run the command "head -c 600000 /dev/zero | tr '\0' a"
      When the user sends a prompt
      Then the command's output was truncated

  Rule: A timeout or a cancellation ends the whole process group (§5, Consequences)

    @C5
    Scenario: A command that times out is ended with everything it started
      Given a session for the project with permission mode auto
      And the model will run the command "sleep 1000 & echo $!; wait" with a timeout of 2000 ms
      And the user started a turn
      When the command has printed its background process id
      And 2 seconds pass
      Then the command timed out
      And no process the command started is still alive

    @C5
    Scenario: A command whose child left the process group still ends on time
      Given a session for the project with permission mode auto
      And the model will run the command "setsid sleep 1000 & echo $!; wait" with a timeout of 2000 ms
      And the user started a turn
      When the command has printed its background process id
      And 2 seconds pass
      Then the command timed out
      And the turn ends

    @C5 @R5.1
    Scenario: Cancelling the turn ends the command with everything it started
      Given a session for the project with permission mode auto
      And the model will run the command "sleep 1000 & echo $!; wait"
      And the user started a turn
      When the command has printed its background process id
      And the user cancels the turn
      Then the turn ended as cancelled
      And the command was cancelled
      And no process the command started is still alive
      And the command is recorded for audit
