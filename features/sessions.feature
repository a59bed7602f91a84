@area:sessions
Feature: Sessions and their configuration
  A session is one agent bound to a project. It starts in Agent mode, can be switched to
  Plan, and is configured only while it is idle. The model provider's key stays between the
  host and the provider, and a missing or failing provider fails a prompt, never the
  session (§1, §5, project rules P21, P24, P25).

  Background:
    Given a connected client

  Rule: Agent is the default mode and Plan is the only other one (§1)

    @R1.2
    Scenario: A new session starts in Agent mode
      When the user creates a session for the project
      Then the session is in Agent mode
      And the session is bound to the project
      And the session is idle
      And the session is stored in the database as it was reported

    @R1.2
    Scenario: A new session starts in Agent mode after a Plan session was created
      Given a session for another project in Plan mode
      When the user creates a session for the project
      Then the session is in Agent mode
      And the session is stored in the database as it was reported

    @R1.1
    Scenario: A session can be created in Plan mode
      When the user creates a session for the project in Plan mode
      Then the session is in Plan mode
      And the session is stored in the database as it was reported

    @R1.1
    Scenario: An idle session switches to Plan mode
      Given a session for the project
      When the user switches the session to Plan mode
      Then the session is in Plan mode
      And the session is stored in the database as it was reported

    @R1.1
    Scenario: An idle session switches back to Agent mode
      Given a session for the project in Plan mode
      When the user switches the session to Agent mode
      Then the session is in Agent mode
      And the session is stored in the database as it was reported

    @R1.1
    Scenario Outline: A new session in a mode other than Agent or Plan is refused (<mode>)
      When the user tries to create a session in a mode called "<mode>"
      Then the request is refused with INVALID_PARAMS
      And no session was created

      Examples:
        | mode   |
        | review |
        | Plan   |
        | AGENT  |

    @R1.1
    Scenario Outline: Switching to a mode other than Agent or Plan is refused (<mode>)
      Given a session for the project
      When the user tries to switch the session to a mode called "<mode>"
      Then the request is refused with INVALID_PARAMS
      And the session's configuration is unchanged

      Examples:
        | mode    |
        | execute |
        | Plan    |

  Rule: Plan is the same agent in a planning state (§1)

    @R1.3
    Scenario: Switching to Plan keeps the agent and its conversation
      Given a session for the project
      And the user had a first exchange with the agent
      When the user switches the session to Plan mode
      And the user continues the conversation
      Then the model was shown the first exchange
      And the session is still the only session, with the same identity
      And the stored conversation of the session holds both exchanges

    @R1.3
    Scenario: Switching back to Agent keeps the planning conversation
      Given a session for the project in Plan mode
      And the user had a first exchange with the agent
      When the user switches the session to Agent mode
      And the user continues the conversation
      Then the model was shown the first exchange
      And the session is still the only session, with the same identity
      And the stored conversation of the session holds both exchanges

  Rule: An idle session accepts configuration changes (§5)

    @R5.6
    Scenario Outline: An idle session takes a new <setting>
      Given a session for the project
      When the user changes the <setting> of the session
      Then the session has the new <setting>

      Examples:
        | setting         |
        | mode            |
        | permission mode |
        | model           |
        | provider        |
        | shell           |

    @R5.6 @R7.3
    Scenario Outline: A session with a shell of its own keeps it when it takes a new <setting>
      Given a session for the project with a shell of its own
      When the user changes the <setting> of the session
      Then the session has the new <setting>

      Examples:
        | setting         |
        | mode            |
        | permission mode |
        | model           |
        | provider        |

    @R5.6 @R7.2
    Scenario: A change of two settings at once is announced whole
      Given a session for the project
      When the user changes the mode and the permission mode of the session in one request
      Then the session has the new mode and permission mode
      And the session's announcement shows every change

    @R5.6
    Scenario: An idle session takes the settings it already has
      Given a session for the project
      When the user configures the session with the settings it already has
      Then the session keeps the settings it had

    @R5.6
    Scenario: The next turn asks for the model the session was changed to
      Given a session for the project
      And the model will answer "The first model answers."
      And the model will answer "The new model answers."
      And the user talked to the agent
      When the user changes the model of the session
      And the user talks to the agent
      Then the provider was asked for the model the session was changed to

    @R5.6
    Scenario: An unknown shell is refused
      Given a session for the project
      When the user selects a shell called "no-such-shell" for the session
      Then the request is refused with SHELL_NOT_FOUND
      And the session's configuration is unchanged

    @R5.6 @P4
    Scenario Outline: A change that names an unknown shell beside the <setting> changes nothing
      Given a session for the project
      When the user changes the <setting> and selects a shell called "no-such-shell" in one request
      Then the request is refused with SHELL_NOT_FOUND
      And nothing the host holds has changed

      Examples:
        | setting         |
        | mode            |
        | model           |

  Rule: Every session is listed as it is reported on its own (§7)

    @R7.2
    Scenario: Every session is listed, however many there are
      When the user creates 25 sessions for the project
      Then the list of sessions shows every one of them as it is reported on its own

  Rule: A session the host does not have cannot be read or changed (project rule P34)

    @P34
    Scenario Outline: A request for a session the host does not have is refused (<request>)
      Given a session for the project
      When the client asks for <request> of a session the host never made
      Then the request is refused with SESSION_NOT_FOUND
      And nothing the host holds has changed

      Examples:
        | request                  |
        | the session              |
        | the plans                |
        | the conversation         |
        | a cancel                 |
        | a change of its mode     |
        | a prompt                 |

  Rule: A session is bound to a valid project root or to none (§2)

    @R2.8
    Scenario: A session without a project
      When the user creates a session without a project
      Then the session has no project

    @R2.8
    Scenario Outline: A relative workspace path is refused (<path>)
      When the user tries to create a session for the relative workspace path <path>
      Then the request is refused with WORKSPACE_INVALID
      And no session was created

      Examples:
        | path                                     |
        | of a folder that does not exist          |
        | of the host's own working folder         |
        | written with a tilde for the home folder |

    @R2.8
    Scenario: A workspace that does not exist is refused
      When the user tries to create a session for a workspace that does not exist
      Then the request is refused with WORKSPACE_INVALID
      And no session was created

    @R2.8
    Scenario: A workspace that is a file is refused
      When the user tries to create a session for a workspace that is a file
      Then the request is refused with WORKSPACE_INVALID
      And no session was created

  Rule: The provider's key goes to the provider and nowhere else (project rule)

    @P21
    Scenario: The model provider receives the key from the host's environment
      Given a session for the project
      And the model will answer "Hello from the model."
      When the user talks to the agent
      Then every request to the model provider carried the key as a bearer token
      And the key appears in no message from the host
      And the key is stored nowhere in the host's data

    @P21
    Scenario: Previewing a local page does not hand it the provider's key
      Given a local web page that says "The dashboard shows 3 open orders"
      And a session for the project in Plan mode
      And the model will preview the local page and then answer
      When the user sends a prompt
      Then the page was asked for without the provider's key

  Rule: A session without a model provider asks no provider (project rule P24)

    @P24
    Scenario: A prompt in a session without a model provider is refused
      Given a session for the project without a model provider
      When the user tries to talk to the agent
      Then the prompt was refused with PROVIDER_NOT_CONFIGURED
      And the session is idle

    @P24
    Scenario: A session takes prompts once a model provider is configured
      Given a session for the project without a model provider
      And the user tried to talk to the agent
      And the user configured a model provider for the session
      And the model will answer "Now I can help."
      When the user talks to the agent
      Then the agent answered "Now I can help."

    @P24
    Scenario: A provider address that ends with a slash reaches the provider
      Given a session for the project whose provider address ends with a slash
      And the model will answer "Now I can help."
      When the user talks to the agent
      Then the agent answered "Now I can help."

  Rule: A failing model provider fails the turn, not the session (project rule P25)

    @P25
    Scenario: A provider error ends the turn as failed
      Given a session for the project
      And the model provider will refuse the next request
      When the user tries to talk to the agent
      Then the turn ended failed with PROVIDER_ERROR
      And the session is idle

    @P25
    Scenario Outline: A model answer that breaks off ends the turn as failed (<break>)
      Given a session for the project
      And the model's answer will <break>
      When the user tries to talk to the agent
      Then the turn ended failed with PROVIDER_ERROR
      And the session is idle

      Examples:
        | break                               |
        | stop short, its connection cut      |
        | end early, without its last piece   |
        | carry an error in the middle        |
        | carry a piece that is not JSON      |
        | carry a piece that is not an object |
        | end before its first piece          |
        | end after its finish reason, without its last piece |

    @P25
    Scenario Outline: After a model answer that broke off, the session takes a new prompt (<break>)
      Given a session for the project
      And the model's answer will <break>
      And the user tried to talk to the agent
      And the model will answer "Back to work."
      When the user talks to the agent
      Then the agent answered "Back to work."

      Examples:
        | break                             |
        | stop short, its connection cut    |
        | end early, without its last piece |
        | carry a piece that is not JSON    |

    @P25
    Scenario: A provider error after a failed tool call ends the turn with the provider's error
      Given a session for the project
      And the model will read "missing.txt", and the model provider will then refuse the request
      When the user tries to talk to the agent
      Then the turn, whose tool call had failed, ended failed with the provider's error

    @R1.3
    Scenario: A turn that failed after a tool call keeps the call and its result in the transcript
      Given a session for the project
      And the model will read "missing.txt", and the model provider will then refuse the request
      When the user tries to talk to the agent
      Then the session's transcript keeps the failed turn's tool call and its result

    @R1.3
    Scenario: The turn after a failed one shows the model the failed turn's call and its result
      Given a session for the project
      And the model will read "missing.txt", and the model provider will then refuse the request
      And the user tried to talk to the agent
      And the model will answer "Back to work."
      When the user talks to the agent
      Then the model was shown the failed turn's tool call and its result

    @P25 @R5.6
    Scenario: After a provider error the session takes a change of its configuration
      Given a session for the project
      And the model provider will refuse the next request
      And the user tried to talk to the agent
      When the user switches the session to Plan mode
      Then the session is in Plan mode

    @P25
    Scenario: The session takes a new prompt after a provider error
      Given a session for the project
      And the model provider will refuse the next request
      And the user tried to talk to the agent
      And the model will answer "Back to work."
      When the user talks to the agent
      Then the agent answered "Back to work."

  Rule: The model's own words are part of the conversation (§1)

    @R1.3
    Scenario Outline: What the model says beside its tool calls stays in the conversation (streamed <style>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project with permission mode auto
      And the model provider streams its answers <style>
      And the model will say "Let me read the notes first." while reading "notes.txt", then answer
      When the user sends a prompt
      Then the model was given its own words "Let me read the notes first." again with its Read call

      Examples:
        | style                                                              |
        | as plain events                                                    |
        | with CR LF line ends, comments and characters split between writes |
        | with CR line ends and events spread over two data lines            |

    @P31
    Scenario Outline: What the model says beside its tool calls is shown to the user (streamed <style>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project with permission mode auto
      And the model provider streams its answers <style>
      And the model will say "Let me read the notes first." while reading "notes.txt", then answer
      When the user sends a prompt
      Then the user was shown the words "Let me read the notes first." as the model said them

      Examples:
        | style                                                              |
        | as plain events                                                    |
        | with CR LF line ends, comments and characters split between writes |
        | with CR line ends and events spread over two data lines            |

    @P31
    Scenario: What the model says once it has begun a tool call is shown to the user too
      Given the project has a file "notes.txt" containing "original"
      And a session for the project with permission mode auto
      And the model will begin reading "notes.txt" and then say "I will sum it up next."
      When the user sends a prompt
      Then the user was shown the words "I will sum it up next." as the model said them

    @R1.3 @P32
    Scenario: Every entry of the conversation carries the host clock's time
      Given a session for the project
      And the host clock was moved two hours ahead
      And the user had a conversation with the agent
      Then every entry of the session's transcript reads the host clock

    @R1.3
    Scenario: After a restart the model is still shown the conversation
      Given a session for the project
      And the user had a conversation with the agent
      And the host restarted
      And the model will answer "I had a look."
      When the user sends a prompt
      Then the model saw the earlier conversation

    @R1.3 @P25
    Scenario: A turn that failed stays in the conversation
      Given a session for the project
      And the model provider will refuse the next request
      And the user tried to talk to the agent
      And the model will answer "I had a look."
      When the user sends another prompt
      Then the model saw the earlier conversation

    @R1.3
    Scenario: A long conversation reaches the model whole
      Given a session for the project
      And the user had 20 exchanges with the agent
      And the model will answer "I had a look."
      When the user sends a prompt
      Then the model saw the earlier conversation

    @R1.3
    Scenario: Each read keeps its own result when the model names two reads alike
      Given a session for the project
      And the project has a file "first.txt" containing "the first file holds apples"
      And the project has a file "second.txt" containing "the second file holds pears"
      And the model read "first.txt" in one exchange and "second.txt" in the next, naming both reads alike
      And the model will answer "I had a look."
      When the user sends a prompt
      Then the model saw the earlier conversation

    @P9
    Scenario: Two reads of one turn named alike are each announced and answered once
      Given a session for the project
      And the project has a file "first.txt" containing "the first file holds apples"
      And the project has a file "second.txt" containing "the second file holds pears"
      And the model will read "first.txt" and then "second.txt" in one turn, naming both reads alike
      When the user sends a prompt
      Then each of the reads named alike was announced once and answered once

    @R1.3
    Scenario: A conversation keeps its order when the clock was set back between two turns
      Given a session for the project
      And the user had a conversation with the agent
      And the host clock was set back an hour
      And the user had another conversation with the agent
      Then the session's transcript lists its entries in the order they were made

  Rule: The user's words and the model's answer pass through unchanged (project rule P31)

    @P31
    Scenario Outline: A prompt reaches the model exactly as the user typed it (<prompt>)
      Given a session for the project
      And the model will answer "Noted."
      When the user sends a prompt <prompt>
      Then the model was given the prompt exactly as typed

      Examples:
        | prompt                                |
        | framed by blank lines and indentation |
        | of nothing but blank space            |

    @P31 @P4
    Scenario: A prompt whose characters come escaped reaches the model as the user typed it
      Given a session for the project
      And the model will answer "Noted."
      When the user sends a prompt with an emoji from a client that escapes every character beyond ASCII
      Then the model was given the prompt exactly as typed

    @P31
    Scenario: A prompt in Plan mode reaches the model as the last thing the user said
      Given a session for the project in Plan mode
      And the model will answer "Noted."
      When the user sends a prompt framed by blank lines and indentation
      Then the model was given the prompt exactly as typed

    @R1.3
    Scenario: A later turn gives the model its earlier answer exactly as it gave it
      Given a session for the project
      And the model will answer with blank lines, indentation and trailing spaces
      And the user talked to the agent
      And the model will answer "Noted."
      When the user sends another prompt
      Then the model was given its earlier answer exactly as it gave it

    @P31
    Scenario: The model's answer reaches the user exactly as the model gave it
      Given a session for the project
      And the model will answer with blank lines, indentation and trailing spaces
      When the user talks to the agent
      Then the answer shown to the user is exactly the model's answer

    @P31
    Scenario: An answer holding no text at all completes the turn and shows no text
      Given a session for the project
      And the model will answer with no text at all
      When the user talks to the agent
      Then the answer shown to the user is exactly the model's answer

    @P31 @R1.3
    Scenario: A turn after an answer holding no text goes on with the conversation
      Given a session for the project
      And the user talked to the agent and the model answered with no text at all
      And the model will answer "Noted."
      When the user sends another prompt
      Then the model saw the earlier conversation

    @P31
    Scenario Outline: An answer beyond ASCII reaches the user whole, however the provider streams it (<style>)
      Given a session for the project
      And the model provider streams its answers <style>
      And the model will answer with characters beyond ASCII and ones taken for line breaks
      When the user talks to the agent
      Then the answer shown to the user is exactly the model's answer

      Examples:
        | style                                                              |
        | as plain events                                                    |
        | with CR LF line ends, comments and characters split between writes |
        | with CR line ends and events spread over two data lines            |
