@area:handshake
Feature: Protocol handshake and storage version
  A client and a host agree on protocol version 9 before anything else happens, and the
  host tells the client which storage schema its database uses and what it can do
  (ADR 0053 §7). Everything the host says follows the published contract.

  Rule: The host speaks protocol version 9 and nothing else (§7)

    @R7.1
    Scenario: A client speaking version 9 is accepted
      Given a freshly started host
      When the client opens the connection asking for protocol version 9
      Then the connection is established with protocol version 9

    @R7.1
    Scenario Outline: A client speaking <which> is refused
      Given a freshly started host
      When the client opens the connection asking for protocol version <version>
      Then the request is refused with UNSUPPORTED_PROTOCOL_VERSION
      And the refusal names protocol version 9 as the one the host speaks
      And the host still accepts a connection asking for protocol version 9

      Examples:
        | which                | version |
        | the previous version | 8       |
        | a future version     | 10      |

    @R7.1
    Scenario Outline: A client is accepted whatever it says of itself (<how>)
      Given a freshly started host
      When the client opens the connection <how>
      Then the connection is established with protocol version 9
      And the host answers the client's next request

      Examples:
        | how                         |
        | without saying who it is    |
        | giving its name and version |

    @R7.1 @P4
    Scenario: A client giving the version as text is refused
      Given a freshly started host
      When the client opens the connection asking for protocol version "9" written as text
      Then the request is refused with INVALID_PARAMS or UNSUPPORTED_PROTOCOL_VERSION
      And the host still accepts a connection asking for protocol version 9

    @R7.1 @P4
    Scenario: A client opening the connection with settings the protocol does not have is refused
      Given a freshly started host
      When the client opens the connection announcing capabilities of its own
      Then the request is refused with INVALID_PARAMS
      And the host still accepts a connection asking for protocol version 9

  Rule: The connection is opened first, and only once (project rule)

    @P6
    Scenario Outline: Nothing is served before the connection is opened (<request>)
      Given a freshly started host
      When the client asks for <request> before opening the connection
      Then the request is refused with NOT_INITIALIZED
      And the host still accepts a connection asking for protocol version 9
      And nothing was created before the connection was opened

      Examples:
        | request                           |
        | the list of sessions              |
        | a new session                     |
        | a new scheduled task              |
        | the list of shells                |
        | the time on the host clock        |
        | a method that was never published |

    @P6
    Scenario: The connection is opened only once
      Given a connected client
      When the client opens the connection a second time
      Then the request is refused with ALREADY_INITIALIZED
      And the host keeps serving requests

    @P6
    Scenario: The host announces what it can do
      Given a freshly started host
      When the client opens the connection asking for protocol version 9
      Then the host announces the capabilities it was started with

  Rule: Everything the host sends follows the published contract (project rule)

    @P5
    Scenario Outline: A refusal carries the catalog's number for its code (<code>)
      Given a connected client
      When the client makes <request>
      Then the refusal carries the number the catalog lists for <code>

      Examples:
        | request                                      | code                |
        | a request that is not JSON                   | PARSE_ERROR         |
        | a request for a method that does not exist   | METHOD_NOT_FOUND    |
        | a request for a session that does not exist  | SESSION_NOT_FOUND   |
        | a request with a parameter that does not exist | INVALID_PARAMS    |
        | a second opening of the connection           | ALREADY_INITIALIZED |

    @P5
    Scenario: A whole conversation follows the published contract
      Given a connected client
      And a session for the project
      And the model will answer "Hello from the model."
      When the user talks to the agent
      Then every message the host sent follows the published contract

  Rule: A new host stores its data in storage schema version 10 (§7)

    @R7.4
    Scenario: A new data directory gets storage schema version 10
      Given a freshly started host
      When the client opens the connection asking for protocol version 9
      Then the host reports storage schema version 10
      And the database file records schema version 10
      And the database file is in write-ahead-log mode

    @R7.4
    Scenario: An empty database file is a new database
      Given a data directory whose database file is empty
      When the host starts on that data directory
      Then the host serves from that data directory
      And the database file records schema version 10

    @R7.4
    Scenario: A data directory whose name means something in a URI is used as named
      Given an empty data directory named "store 100%41 ?x#1"
      When the host starts on that data directory
      Then the host serves from that data directory
      And the database is in the data directory and nowhere else
      And the database file records schema version 10
