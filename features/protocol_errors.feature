@area:protocol_errors
Feature: Malformed input
  Whatever a client sends, the host answers with a canonical error code from the published
  catalog and keeps serving; nothing already stored changes (§7, protocol v9 contract).

  Background:
    Given a connected client
    And a session for the project

  Rule: Input that is not a request gets a canonical error and the host keeps serving (project rule)

    @P1
    Scenario: A line that is not JSON
      When the client sends a line that is not JSON
      Then the host answers it with PARSE_ERROR
      And the host keeps serving requests
      And the session list contains the session

    @P1
    Scenario: A line that is not UTF-8
      When the client sends a line that is not UTF-8
      Then the host answers it with PARSE_ERROR
      And the host keeps serving requests

    @P1
    Scenario Outline: A JSON value that is not a request is refused (<value>)
      When the client offers <value> as a request
      Then the host answers it with INVALID_REQUEST
      And the host keeps serving requests

      Examples:
        | value                                      |
        | a list of requests                         |
        | a plain number                             |
        | an object that names no method             |
        | a request for another version of JSON-RPC  |

    @P1
    Scenario Outline: A malformed line without an identifier is answered all the same (<value>)
      When the client offers <value> as a request
      Then the host answers it with <refusal>
      And the host keeps serving requests

      Examples:
        | value                                              | refusal                           |
        | a line without an id that has a member of its own  | INVALID_REQUEST                   |
        | a line without an id whose params are null         | INVALID_REQUEST or INVALID_PARAMS |
        | a line without an id whose params are a list       | INVALID_REQUEST or INVALID_PARAMS |

    @P1
    Scenario: Blank lines between requests are ignored
      When the client sends blank lines around two requests
      Then the host answers exactly the two requests
      And the host keeps serving requests

    @P1
    Scenario Outline: The host answers under the identifier the client chose (<identifier>)
      When the client sends two requests identified by <identifier>
      Then each answer carries the identifier of its request

      Examples:
        | identifier                                 |
        | text                                       |
        | text made of digits                        |
        | zero and a negative number                 |
        | the largest integer every client can hold  |
        | numbers that do not start at one           |
        | text longer than any id the host makes     |

    @P1
    Scenario Outline: An integer identifier beyond what every client can hold is answered exactly or refused (<identifier>)
      When the client sends two requests identified by <identifier>
      Then each answer carries the identifier of its request, or refuses the request without one

      Examples:
        | identifier                                          |
        | integers one past the largest every client can hold |
        | integers of twenty digits                           |

    @P1
    Scenario: An identifier used again once its request was answered gets a fresh answer
      Given the client read the session under an identifier of its choosing
      And the user switched the session to Plan mode
      When the client reads the session again under the same identifier
      Then the answer shows the session in Plan mode

    @P1
    Scenario: A request that creates something, sent again under its identifier, creates again
      When the client creates a session for the project twice under one identifier
      Then each of the two requests made a session of its own

  Rule: A frame above the announced limit is refused without harm (project rule)

    @P2
    Scenario: A request twice as long as the frame limit is refused once
      When the client sends a request twice as long as the host's frame limit, padded with characters of several bytes
      Then the host answers it with FRAME_TOO_LARGE
      And the host answered that line once and nothing else
      And the session list contains the session

    @P2
    Scenario Outline: A request one byte over the frame limit is refused (<padding>)
      When the client sends a request one byte longer than the host's frame limit, padded with <padding>
      Then the host answers it with FRAME_TOO_LARGE
      And the host keeps serving requests
      And the session list contains the session

      Examples:
        | padding                        |
        | whitespace between its tokens  |
        | characters of several bytes    |

    @P2
    Scenario Outline: A request exactly at the frame limit is served (<padding>)
      When the client sends a request exactly as long as the host's frame limit, padded with <padding>
      Then the host serves it
      And the host keeps serving requests

      Examples:
        | padding                        |
        | whitespace between its tokens  |
        | characters of several bytes    |

  Rule: Only the published methods exist (project rule)

    @P3
    Scenario Outline: A method that is not published is refused (<method>)
      When the client calls <method>
      Then the request is refused with METHOD_NOT_FOUND
      And the host keeps serving requests

      Examples:
        | method                                  |
        | a method that was never published       |
        | a published method spelt in other case  |
        | a method without its group              |

    @P3
    Scenario Outline: Outside conformance mode the conformance controls do not exist (<control>)
      Given the host runs as in production, without conformance mode
      When the client uses the conformance control <control>
      Then the request is refused with METHOD_NOT_FOUND
      And the host keeps serving requests

      Examples:
        | control               |
        | that reads the clock  |
        | that sets the clock   |
        | that moves the clock  |
        | that arms a fault     |

  Rule: Params must match the published schema and a refusal changes nothing (project rule)

    @P4
    Scenario: A parameter that does not exist is refused
      When the client lists sessions with an unexpected parameter
      Then the request is refused with INVALID_PARAMS
      And the host keeps serving requests

    @P4
    Scenario Outline: A change with one invalid setting changes nothing (<change>)
      When the user requests one change of <change>
      Then the request is refused with INVALID_PARAMS
      And the session's configuration is unchanged

      Examples:
        | change                                                      |
        | the mode together with an unknown permission mode           |
        | the model together with an unknown mode                     |
        | the permission mode together with a malformed shell         |
        | the mode together with a provider on a port that cannot be  |

    @P4
    Scenario Outline: Broken params are refused as such while the session is busy (<request>)
      Given the model takes its time to answer
      And the user started a turn
      When the client sends <request> whose params break the schema
      Then the request is refused with INVALID_PARAMS
      And the turn is still running

      Examples:
        | request                   |
        | a change of configuration |
        | a prompt                  |

    @P4
    Scenario Outline: Broken params are refused as such while a plan awaits approval (<request>)
      Given a plan titled "Waiting" is awaiting approval
      When the client sends <request> whose params break the schema
      Then the request is refused with INVALID_PARAMS
      And an approval is pending for the plan titled "Waiting"

      Examples:
        | request                   |
        | a change of configuration |
        | a prompt                  |

    @P4
    Scenario Outline: Broken params are refused as such for a session that does not exist (<request>)
      When the client sends <request> for a session that does not exist, with params that break the schema
      Then the request is refused with INVALID_PARAMS
      And the host keeps serving requests

      Examples:
        | request                   |
        | a change of configuration |
        | a prompt                  |

    @P4
    Scenario Outline: A value out of the published range is refused (<value>)
      When the client submits <value>
      Then the request is refused with INVALID_PARAMS
      And nothing the host holds has changed
      And the host keeps serving requests

      Examples:
        | value                                               |
        | a clock setting beyond the last representable date  |
        | a scheduled time beyond the last representable date |
        | a provider address without a host                   |
        | a provider address that is not a web address        |
        | a provider address of another scheme with a host     |
        | a provider address carrying a user name and password |
        | a model name of absurd length                       |
        | a prompt holding half of a surrogate pair           |
        | a task name holding half of a surrogate pair        |
        | a task name holding half of a surrogate pair, escaped in capitals |
        | a scheduled time with a fraction of a millisecond   |
        | a mode given as null                                |
        | a provider with a member of its own                 |
        | a change that names no setting                      |
        | a project path longer than the published limit      |
        | a session without its project field                 |
        | a session whose project field is spelt in snake case |
        | a permission answer that is neither allow nor deny  |
        | a clock move past the last deadline it can set      |

    @P4
    Scenario Outline: A value at the edge of the published range is taken (<value>)
      When the client sends <value>, which the schema allows
      Then the host takes it and answers it as given
      And the host keeps serving requests

      Examples:
        | value                                                      |
        | a scheduled time at the last representable date            |
        | a task name of the longest length in letters beyond ASCII  |
        | a task name of the longest length in characters beyond the BMP |
        | a clock setting at the latest moment the clock may reach   |
        | a clock move to the latest moment the clock may reach      |
        | a provider address on port zero                            |

    @P4
    Scenario Outline: A number the host cannot hold is refused (<number>)
      When the client moves the host clock by <number>
      Then the host refuses it as unreadable or invalid
      And nothing the host holds has changed
      And the host keeps serving requests

      Examples:
        | number                                  |
        | an integer of five thousand digits      |
        | a value that is not a number            |
        | an infinite value                       |
        | a number beyond the range of a double   |

    @P4
    Scenario: A whole number written with a decimal point is taken as that number or refused
      When the client moves the host clock by a minute written with a decimal point
      Then the host moved its clock by a minute or refused the request as invalid
      And the host keeps serving requests

  Rule: There is no way to send a plan back for changes (§1)

    @R1.10
    Scenario Outline: A plan cannot be sent back for changes (<how>)
      Given a plan titled "Add caching" is awaiting approval
      When the user tries to send the plan back for changes <how>
      Then the request is refused with <code>
      And the plan still awaits the user's decision

      Examples:
        | how                                         | code             |
        | through an action of its own                | METHOD_NOT_FOUND |
        | by approving with a request for changes     | INVALID_PARAMS   |
        | by choosing changes as the permission mode  | INVALID_PARAMS   |
        | by rejecting with a request for changes     | INVALID_PARAMS   |

  Rule: A decision on a plan carries no feedback (§3)

    @R3.7
    Scenario Outline: A decision with feedback is refused (<decision>)
      Given a plan titled "Add caching" is awaiting approval
      When the user tries <decision> with a note for the model
      Then the request is refused with INVALID_PARAMS
      And the plan still awaits the user's decision

      Examples:
        | decision                         |
        | rejecting                        |
        | rejecting with a comment         |
        | approving                        |
