@area:handshake
Feature: Protocol handshake and storage version
  A client and a host agree on protocol version 9 before anything else happens, and the
  host tells the client which storage schema its database uses (ADR 0053 §7).

  Rule: The host speaks protocol version 9 and nothing else (§7)

    @R7.1 @P5
    Scenario: A client speaking version 9 is accepted
      Given a freshly started host
      When the client opens the connection asking for protocol version 9
      Then the connection is established with protocol version 9

    @R7.1
    Scenario: A client speaking the previous version is refused
      Given a freshly started host
      When the client opens the connection asking for protocol version 8
      Then the request is refused with UNSUPPORTED_PROTOCOL_VERSION
      And the host still accepts a connection asking for protocol version 9

    @R7.1
    Scenario: A client speaking a future version is refused
      Given a freshly started host
      When the client opens the connection asking for protocol version 10
      Then the request is refused with UNSUPPORTED_PROTOCOL_VERSION

    @R7.1
    Scenario: Nothing is served before the connection is opened
      Given a freshly started host
      When the client sends a request before opening the connection
      Then the request is refused with NOT_INITIALIZED
      And the host still accepts a connection asking for protocol version 9

    @R7.1
    Scenario: The connection is opened only once
      Given a connected client
      When the client opens the connection a second time
      Then the request is refused with ALREADY_INITIALIZED

  Rule: A new host stores its data in storage schema version 10 (§7)

    @R7.4
    Scenario: A new data directory gets storage schema version 10
      Given a freshly started host
      When the client opens the connection asking for protocol version 9
      Then the host reports storage schema version 10
      And the database file records schema version 10
      And the database file is in write-ahead-log mode
