@area:protocol_errors
Feature: Malformed input
  Whatever a client sends, the host answers with a canonical error code from the published
  catalog and keeps serving; nothing already stored changes (§7, protocol v9 contract).

  Background:
    Given a connected client
    And a session for the project

  Rule: Input that is not a request gets a canonical error and the host keeps serving (§7)

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
    Scenario: A JSON value that is not a request object
      When the client sends a JSON value that is not a request object
      Then the host answers it with INVALID_REQUEST
      And the host keeps serving requests

  Rule: A frame above the published limit is refused without harm (§7)

    @P2
    Scenario: An oversized frame
      When the client sends a line larger than the host's frame limit
      Then the host answers it with FRAME_TOO_LARGE
      And the host keeps serving requests
      And the session list contains the session

  Rule: Only the published methods exist (§7)

    @P3
    Scenario: An unknown method
      When the client calls the unknown method session/explode
      Then the request is refused with METHOD_NOT_FOUND
      And the host keeps serving requests

  Rule: Params must match the published schema (§7)

    @P4
    Scenario: An unexpected parameter
      When the client lists sessions with an unexpected parameter
      Then the request is refused with INVALID_PARAMS
      And the host keeps serving requests

    @P4 @R1.1
    Scenario: A mode that does not exist
      When the user tries to create a session in a mode called "review"
      Then the request is refused with INVALID_PARAMS
      And the session list contains the session
