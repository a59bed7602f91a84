@area:plan_tools
Feature: What the agent may do while planning
  Plan is the same agent in a planning state. While planning, the host offers the model a
  fixed set of read-and-investigate tools plus SubmitPlan, and refuses everything that
  would change the project on its own authority (§1). The tools it offers do their work,
  every call gets exactly one answer, a page preview never leaves the machine, no search
  the model asks for can stall the host, no tool takes an input its published shape
  does not allow, and without a project there are no files to work on (project rules P9,
  P10, P22, P23, P27, P30).

  Background:
    Given a connected client

  Rule: Plan offers exactly Read, Glob, Grep, BrowserPreview, Bash, EnterPlanMode, SubmitPlan and new_context (§1)

    @R1.4
    Scenario: The model is offered exactly the planning tools, also after a tool call
      Given the project has a file "notes.txt" containing "original"
      And a session for the project in Plan mode
      And the model will read "notes.txt" and then answer
      When the user sends a prompt
      Then the tools offered to the model are exactly Read, Glob, Grep, BrowserPreview, Bash, EnterPlanMode, SubmitPlan, new_context

    @R1.4
    Scenario: A session switched to Plan after a conversation is offered exactly the planning tools
      Given a session for the project
      And the user had a conversation with the agent
      And the user switched the session to Plan mode
      And the model will answer "Nothing to plan yet."
      When the user sends a prompt
      Then the tools offered to the model are exactly Read, Glob, Grep, BrowserPreview, Bash, EnterPlanMode, SubmitPlan, new_context

  Rule: There is no ExitPlanMode (§1)

    @R1.9
    Scenario Outline: No tool to leave Plan mode is offered (<mode>)
      Given a session for the project in <mode> mode
      And the model will answer "Nothing to do."
      When the user sends a prompt
      Then the model was not offered ExitPlanMode

      Examples:
        | mode  |
        | Plan  |
        | Agent |

    @R1.9
    Scenario Outline: A call to ExitPlanMode is refused as an unknown tool (<mode>)
      Given a session for the project in <mode> mode
      And the model will call ExitPlanMode
      When the user sends a prompt
      Then the ExitPlanMode call was refused with UNKNOWN_TOOL
      And the session is in <mode> mode

      Examples:
        | mode  |
        | Plan  |
        | Agent |

  Rule: The host itself refuses Write, Edit, plugin tools and unknown tools while planning (§1)

    @R1.5
    Scenario Outline: A change the model attempts while planning is refused (<tool>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project in Plan mode with permission mode auto
      And the model will call <tool> on "notes.txt"
      When the user sends a prompt
      Then the <tool> call was refused with <code>
      And nothing in the project changed

      Examples:
        | tool                  | code         |
        | Write                 | TOOL_DENIED  |
        | Edit                  | TOOL_DENIED  |
        | mcp__files__save      | TOOL_DENIED  |
        | plugin__notes__append | TOOL_DENIED  |
        | TeleportFiles         | UNKNOWN_TOOL |
        | read                  | UNKNOWN_TOOL |
        | WRITE                 | UNKNOWN_TOOL |

    @R1.5 @P27
    Scenario Outline: A change the model attempts while planning with unreadable input is refused without a question (<case>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project in Plan mode
      And the model will call <tool> with the input <input>
      When the user sends a prompt
      Then the <tool> call was refused with TOOL_DENIED or INVALID_TOOL_INPUT
      And the user was not asked for permission
      And nothing in the project changed
      And the session is in Plan mode

      Examples:
        | case                            | tool  | input                                                                                    |
        | a write without content         | Write | {"path": "made.txt"}                                                                     |
        | a write to a path holding a NUL | Write | {"path": "made\u0000.txt", "content": "x"}                                               |
        | an edit whose flag is text      | Edit  | {"path": "notes.txt", "old_string": "original", "new_string": "new", "replace_all": "y"} |

  Rule: Plan is the same agent as Agent, in a planning state (§1)

    @R1.3
    Scenario: Switching to Plan keeps the conversation
      Given a session for the project
      And the user had a conversation with the agent
      And the model will answer "I had a look."
      When the user switches the session to Plan mode
      And the user sends a prompt
      Then the model saw the earlier conversation

  Rule: Every tool does its work, in Plan and in Agent (project rule P10)

    @P10
    Scenario: Reading a file gives the model its text
      Given the project has a file "notes.txt" containing "the cache lives in memory"
      And a session for the project in Plan mode
      And the model will read "notes.txt" and then answer
      When the user sends a prompt
      Then the model was given "the cache lives in memory" after its Read call

    @P10
    Scenario: Reading a file that seems to hold secrets gives the model its text as written
      Given the project has a file "config.env" containing "DB_PASSWORD=hunter2 API_TOKEN: abc123"
      And a session for the project in Plan mode
      And the model will read "config.env" and then answer
      When the user sends a prompt
      Then the model was given "DB_PASSWORD=hunter2 API_TOKEN: abc123" after its Read call

    @P10
    Scenario: Two files read in one message each reach the model in the answer to their own call
      Given the project has a file "a.txt" containing "alpha lives here"
      And the project has a file "b.txt" containing "bravo lives there"
      And a session for the project in Plan mode
      And the model will read "a.txt" and "b.txt" in one message
      When the user sends a prompt
      Then the model was given each file's text in the answer to its own call

    @P10
    Scenario: A command and a read in one message each reach the model in the answer to their own call
      Given the project has a file "a.txt" containing "alpha lives here"
      And a session for the project in Plan mode with permission mode auto
      And the model will run a command that prints "bravo-from-the-shell" and read "a.txt" in one message
      When the user sends a prompt
      Then the model was given each call's own result in the answer to that call

    @P10
    Scenario: Reading a file gives the model its line ends as they are
      Given the project has a file "notes.txt" whose lines end in CR LF
      And a session for the project in Plan mode
      And the model will read "notes.txt" and then answer
      When the user sends a prompt
      Then the model was given every line of "notes.txt" with its own line end

    @P10
    Scenario Outline: Reading part of a file gives the model the lines asked for (<case>)
      Given the project has a file "lines.txt" whose lines are alpha-line, bravo-line, charlie-line, delta-line
      And a session for the project in Plan mode
      And the model will read "lines.txt" from line <offset>, <limit> lines at most, and then answer
      When the user sends a prompt
      Then the model was given <found> but not <left out> after its Read call

      Examples:
        | case                    | offset | limit | found                                 | left out                        |
        | from the first line     | 1      | 2     | "alpha-line" and "bravo-line"         | "charlie-line"                  |
        | one line from the middle | 2     | 1     | "bravo-line"                          | "alpha-line" and "charlie-line" |
        | past the last line      | 3      | 5     | "charlie-line" and "delta-line"       | "bravo-line"                    |

    @P10
    Scenario: Reading from a last line without a line end gives that line
      Given the project has a file "notes/tail.txt" whose last line "unterminated_marker = 1" has no line end
      And a session for the project in Plan mode
      And the model will read "notes/tail.txt" from line 2, 5 lines at most, and then answer
      When the user sends a prompt
      Then the model was given "unterminated_marker = 1" but not "a first line" after its Read call

    @P10
    Scenario: Reading a file that starts with a byte order mark gives the model that mark
      Given the project has a file "bom.txt" that starts with a byte order mark before "hello from the file"
      And a session for the project in Plan mode
      And the model will read "bom.txt" and then answer
      When the user sends a prompt
      Then the model was given the byte order mark before "hello from the file" after its Read call

    @P10
    Scenario: Searching the project matches a line far longer than a read buffer as one line
      Given the project has a file "long.txt" holding one line of "HEAD", 10000 "a" and "TAIL"
      And a session for the project in Plan mode
      And the model will search the project for "^HEADa+TAIL$" and then answer
      When the user sends a prompt
      Then the model was given "long.txt" after its Grep call

    @P10
    Scenario: Looking for files gives a name with a decomposed accent as it is on disk
      Given the project has a file whose name "café.md" has its accent decomposed
      And a session for the project in Plan mode
      And the model will look for files matching "*.md" and then answer
      When the user sends a prompt
      Then the model was given the file's name with its accent decomposed after its Glob call

    @P10
    Scenario: Searching the project finds a match on a last line without a line end
      Given the project has a file "notes/tail.txt" whose last line "unterminated_marker = 1" has no line end
      And a session for the project in Plan mode
      And the model will search the project for "unterminated_\w+" and then answer
      When the user sends a prompt
      Then the model was given "notes/tail.txt" and "unterminated_marker" after its Grep call

    @P10
    Scenario: Searching the project finds the matching lines in their files
      Given the project has a file "src/cache.py" containing "def evict_oldest(): pass"
      And the project has a file "src/store.py" containing "def keep_all(): pass"
      And the project has a file "src/legacy.py" containing "def EVICT_ALL(): pass"
      And a session for the project in Plan mode
      And the model will search the project for "evict_\w+" and then answer
      When the user sends a prompt
      Then the model was given "src/cache.py" and "evict_oldest" but not "src/store.py" and "src/legacy.py" after its Grep call

    @P10
    Scenario Outline: Looking for files by pattern finds exactly the files it names (<case>)
      Given the project holds a small code base
      And a session for the project in Plan mode
      And the model will look for files matching "<pattern>" and then answer
      When the user sends a prompt
      Then the model was given <found> but not <left out> after its Glob call

      Examples:
        | case                          | pattern   | found                               | left out                          |
        | one folder's files            | src/*.py  | "src/cache.py" and "src/store.py"   | "src/sub/deep.py" and "README.md" |
        | the top level's files         | *.md      | "README.md"                         | "docs/guide.md"                   |
        | a named folder's files        | docs/*.md | "docs/guide.md"                     | "README.md"                       |
        | every folder's files          | **/*.py   | "src/cache.py" and "src/sub/deep.py" | "README.md" and "docs/guide.md"   |
        | a hidden folder's files       | **/*.yml  | ".github/ci.yml"                    | "src/cache.py"                    |
        | names holding signs           | *.md      | "README.md" and "notes(1).md"       | "xmd" and "NOTES.MD"              |
        | a name spelt out with signs   | c++.txt   | "c++.txt"                           | "xmd" and "notes(1).md"           |
        | a file that is not text       | assets/*  | "assets/logo.png"                   | "README.md"                       |

    @P10
    Scenario: Files are named from the project also when it was given with a trailing slash
      Given the project holds a small code base
      And a session in Plan mode for the project given with a trailing slash
      And the model will look for files matching "src/*.py" and then answer
      When the user sends a prompt
      Then the model was given "src/cache.py" and "src/store.py" but not "README.md" after its Glob call

    @P10
    Scenario Outline: Searching only the files a pattern names (<case>)
      Given the project holds a small code base
      And a session for the project in Plan mode
      And the model will search the project for "<pattern>" in files matching "<glob>" and then answer
      When the user sends a prompt
      Then the model was given <found> but not <left out> after its Grep call

      Examples:
        | case                    | pattern | glob     | found          | left out                            |
        | the top level's files   | e       | *.md     | "README.md"    | "docs/guide.md"                     |
        | one folder's files      | evict   | src/*.py | "src/cache.py" | "src/sub/deep.py" and ".github/ci.yml" |

    @P10
    Scenario Outline: Searching the project matches line by line (<case>)
      Given the project holds a small code base
      And a session for the project in Plan mode
      And the model will search the project for "<pattern>" and then answer
      When the user sends a prompt
      Then the model was given <found> but not <left out> after its Grep call

      Examples:
        | case                                | pattern      | found                                   | left out                            |
        | a pattern anchored at a line start  | ^def evict   | "src/cache.py" and "def evict_oldest"   | "src/store.py" and "import os"      |
        | a pattern anchored at a line end    | pass$        | "src/store.py" and "def keep_all"       | "README.md"                         |
        | text beyond ASCII                   | café         | "src/cache.py" and "café au lait"       | "src/store.py" and "evict_oldest"   |
        | a file in a hidden folder           | evict_in_ci  | ".github/ci.yml"                        | "src/cache.py"                      |
        | a line holding other breaks         | alpha\W+beta\W+gamma\W+delta | "src/cache.py" and "alpha" | "src/store.py" and "evict_oldest" |

    @P10
    Scenario: Previewing a local page gives the model the page
      Given a local web page that says "The dashboard shows 3 open orders"
      And a session for the project in Plan mode
      And the model will preview the local page and then answer
      When the user sends a prompt
      Then the local page was fetched
      And the model was given the page's text after its BrowserPreview call

    @P10
    Scenario: A command the model runs while planning runs
      Given a session for the project in Plan mode with permission mode auto
      And the model will run a command that prints "planning-probe-42" and then answer
      When the user sends a prompt
      Then the model was given "planning-probe-42" after its Bash call
      And nothing in the project changed

    @P10
    Scenario: Entering Plan mode during an Agent turn turns it into a Plan turn
      Given the project has a file "notes.txt" containing "original"
      And a session for the project
      And the model will switch to planning, read "notes.txt" and then submit a plan titled "Planned on the way"
      When the user sends a prompt
      Then after the switch the model was offered exactly the planning tools, every time it was asked
      And an approval is pending for the plan titled "Planned on the way"
      And the session is in Plan mode

    @R7.2
    Scenario: Entering Plan mode during a turn is announced while the turn runs
      Given a session for the project
      And the model will switch to planning and then take its time to answer
      When the user sends a prompt and the model is still answering after the switch
      Then the session was announced in Plan mode while the model was still answering

    @P10
    Scenario: A turn that entered Plan mode and then failed leaves the session in Plan
      Given a session for the project
      And the model will switch to planning, and the model provider will then refuse the request
      When the user tries to talk to the agent
      Then the session is still in Plan mode, where the failed turn put it

    @P10
    Scenario: Starting a new context replaces the conversation with its summary
      Given a session for the project in Plan mode
      And the user had a conversation with the agent
      And the model will start a new context summarised as "Summary: the cache is slow" and then answer
      When the user sends a prompt
      Then after the new context the model saw the summary and none of the earlier conversation

    @R1.3
    Scenario: A new context keeps the earlier conversation in the session's transcript
      Given a session for the project in Plan mode
      And the user had a conversation with the agent
      And the model will start a new context summarised as "Summary: the cache is slow" and then answer
      When the user sends a prompt
      Then the session's transcript still holds the earlier conversation

    @P10
    Scenario: After a new context later turns carry the summary instead of the conversation
      Given a session for the project in Plan mode
      And the user had a conversation with the agent
      And the model will start a new context summarised as "Summary: the cache is slow" and then answer
      And the user sent a prompt
      And the model will answer "Understood."
      When the user sends another prompt
      Then the model again saw the summary and none of the conversation before it

    @P10
    Scenario: After a restart later turns still carry the summary instead of the conversation
      Given a session for the project in Plan mode
      And the user had a conversation with the agent
      And the model will start a new context summarised as "Summary: the cache is slow" and then answer
      And the user sent a prompt
      And the host restarted
      And the model will answer "Understood."
      When the user sends another prompt
      Then the model again saw the summary and none of the conversation before it

    @P10 @R4.7
    Scenario: An execution after a new context carries the summary instead of the conversation
      Given a session for the project in Plan mode
      And the user had a conversation with the agent
      And the model started a new context summarised as "Summary: the cache is slow" and submitted a plan titled "Speed up the cache"
      And the model will answer "The plan is carried out."
      When the user approves the plan with permission mode auto
      Then the execution's first request carried the summary and none of the conversation before it

    @P10
    Scenario Outline: A new context called beside another tool in one message still replaces the conversation (<order>)
      Given a session for the project in Plan mode
      And the user had a conversation with the agent
      And the model will start a new context summarised as "Summary: the cache is slow" <order> in one message and then answer
      When the user sends a prompt
      Then after the new context the model saw the summary and none of the earlier conversation

      Examples:
        | order                      |
        | before looking for files   |
        | after looking for files    |

    @P10
    Scenario: A new context with an empty summary still replaces the conversation
      Given a session for the project in Plan mode
      And the user had a conversation with the agent
      And the model will start a new context with an empty summary and then answer
      When the user sends a prompt
      Then after the new context the model saw the summary and none of the earlier conversation

    @P10
    Scenario: A second new context also replaces what was said since the first
      Given a session for the project in Plan mode
      And the user had a conversation with the agent
      And the model will start a new context summarised as "Summary: the cache is slow" and then answer
      And the user sent a prompt
      And the user had another conversation with the agent
      And the model will start a new context summarised as "Summary: move the cache to redis" and then answer
      And the user sent a prompt
      And the model will answer "Understood."
      When the user sends another prompt
      Then the model again saw the summary and none of the conversation before it

    @P10
    Scenario: Editing a file in Agent mode changes the text as asked
      Given the project has a file "notes.txt" containing "the cache lives in memory"
      And a session for the project with permission mode auto
      And the model will change "memory" to "redis" in "notes.txt" and then answer
      When the user sends a prompt
      Then the Edit call worked and the model was given its result
      And the project file "notes.txt" now reads "the cache lives in redis"

    @P10
    Scenario: Editing a file keeps every byte the edit did not touch
      Given the project has a file "notes.txt" whose lines end in CR LF
      And a session for the project with permission mode auto
      And the model will change "two" to "2" in "notes.txt" and then answer
      When the user sends a prompt
      Then the Edit call worked and the model was given its result
      And the project file "notes.txt" still ends its lines in CR LF, with "two" changed to "2"

  Rule: While planning, the permission mode still asks before a command (project rule P7)

    @P7
    Scenario Outline: A command the model runs while planning waits for the user's permission (<mode>)
      Given a session for the project in Plan mode with permission mode <mode>
      And the model will run the command "echo planned > planned.txt"
      When the user sends a new request to the agent
      Then the user is asked for permission before Bash
      When the user denies it
      Then the agent has finished the request
      And the Bash call reports that permission was denied
      And the project is as it was before

      Examples:
        | mode         |
        | ask          |
        | accept-edits |

    @P7
    Scenario: A command allowed while planning asks again when the execution runs it
      Given a session for the project in Plan mode with permission mode ask
      And the user allowed the command "echo planned-probe" while the model planned "Probe the build"
      And the model will run the command "echo planned-probe"
      When the user approves the plan with permission mode ask
      Then the user is asked for permission before Bash
      When the user denies it
      Then the execution has finished
      And the Bash call reports that permission was denied

  Rule: A page preview never leaves the machine's loopback interface (project rule P23)

    @P23
    Scenario Outline: Previewing a page that is not on the loopback interface is refused (<place>)
      Given a web page on <place> that says "The admin panel lists 7 users"
      And a session for the project in Plan mode
      And the model will preview that page and then answer
      When the user sends a prompt
      Then the BrowserPreview call was refused with BROWSER_PREVIEW_REFUSED
      And the page on the network address was never requested
      And the model was not given that page's text

      Examples:
        | place                          |
        | the machine's network address  |
        | the address of every interface |

    @P23
    Scenario: Previewing a local page by the name localhost is not refused
      Given a local web page that says "The dashboard shows 3 open orders"
      And a session for the project in Plan mode
      And the model will preview the local page by the name localhost and then answer
      When the user sends a prompt
      Then the preview by the name localhost was not refused as leaving the machine

    @P23
    Scenario: A local page that sends the preview elsewhere is not followed off the machine
      Given a web page on the machine's network address that says "The admin panel lists 7 users"
      And a local web page that redirects to that page
      And a session for the project in Plan mode
      And the model will preview the local page and then answer
      When the user sends a prompt
      Then the BrowserPreview call was refused with BROWSER_PREVIEW_REFUSED
      And the page on the network address was never requested
      And the model was not given that page's text

  Rule: A session without a project has no files to work on (project rule P30)

    @P30
    Scenario Outline: A file tool in a session without a project is refused (<tool>)
      Given a session without a project in <mode> mode
      And the model will call <tool> with the input <input>
      When the user sends a prompt
      Then the <tool> call was refused with WORKSPACE_REQUIRED

      Examples:
        | tool  | mode  | input                                                       |
        | Read  | Plan  | {"path": "notes.txt"}                                       |
        | Glob  | Plan  | {"pattern": "*"}                                            |
        | Grep  | Plan  | {"pattern": "a"}                                            |
        | Write | Agent | {"path": "notes.txt", "content": "written"}                 |
        | Edit  | Agent | {"path": "notes.txt", "old_string": "a", "new_string": "b"} |

    @P30
    Scenario Outline: A file tool in a session without a project is refused a file named by its full path (<tool>)
      Given a session without a project in <mode> mode
      And a file outside any project holds "a note nobody may touch"
      And the model will call <tool> on that file by its full path
      When the user sends a prompt
      Then the <tool> call was refused with WORKSPACE_REQUIRED
      And the file outside any project was neither changed nor shown to the model

      Examples:
        | tool  | mode  |
        | Read  | Plan  |
        | Glob  | Plan  |
        | Write | Agent |
        | Edit  | Agent |

  Rule: A tool takes only the input its published shape allows (project rule P27)

    @P27 @P10
    Scenario: A call whose input cannot be read leaves the next call of its message to run
      Given the project has a file "notes.txt" containing "the notes of the day"
      And a session for the project with permission mode auto
      And the model will read "notes.txt" in one message with a call whose input cannot be read
      When the user sends a prompt
      Then the model was given each file's text in the answer to its own call

    @P27
    Scenario Outline: A tool call outside the tool's published input is refused and does nothing (<case>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project with permission mode auto
      And the model will call <tool> with the input <input>
      When the user sends a prompt
      Then the <tool> call was refused with INVALID_TOOL_INPUT
      And nothing in the project changed
      And the session is in Agent mode

      Examples:
        | case                                    | tool           | input                                                                                   |
        | a command allowed more than an hour     | Bash           | {"command": "touch ran.txt", "timeout_ms": 3600001}                                     |
        | a command with an option nobody defined | Bash           | {"command": "touch ran.txt", "cwd": "/"}                                                |
        | a read of a number                      | Read           | {"path": 7}                                                                             |
        | an empty file pattern                   | Glob           | {"pattern": ""}                                                                         |
        | a search with an option nobody defined  | Grep           | {"pattern": "original", "ignore_case": true}                                            |
        | a preview with an option nobody defined | BrowserPreview | {"url": "http://127.0.0.1:9/", "method": "POST"}                                        |
        | a write without content                 | Write          | {"path": "made.txt"}                                                                    |
        | a write of half a surrogate pair        | Write          | {"path": "made.txt", "content": "odd \ud800 text"}                                      |
        | a write to a path holding a NUL         | Write          | {"path": "made\u0000.txt", "content": "x"}                                              |
        | a read of a path holding a NUL          | Read           | {"path": "notes.txt\u0000.md"}                                                          |
        | an edit whose flag is text              | Edit           | {"path": "notes.txt", "old_string": "original", "new_string": "new", "replace_all": "y"} |
        | entering Plan with a reason             | EnterPlanMode  | {"reason": "to think first"}                                                            |
        | a context reset that keeps something    | new_context    | {"summary": "Start over", "keep": ["notes.txt"]}                                        |

    @P27
    Scenario Outline: A tool call at the edge of the tool's published input runs (<case>)
      Given a session for the project with permission mode auto
      And the model will call <tool> with the input <input>
      When the user sends a prompt
      Then the <tool> call ran and made "<made>"

      Examples:
        | case                              | tool | input                                               | made    |
        | a command allowed exactly an hour | Bash | {"command": "touch ran.txt", "timeout_ms": 3600000} | ran.txt |

    @P27
    Scenario: A call with empty arguments to a tool that needs none is read as none or refused
      Given a session for the project
      And the model will call EnterPlanMode with empty arguments
      When the user sends a prompt
      Then the EnterPlanMode call was taken as one without arguments or refused as invalid input, and the session is in the mode that says which

  Rule: Every tool call gets exactly one result, with a code and a status from the catalog (project rule P9)

    @P9
    Scenario Outline: An ordinary tool failure is reported with its code (<failure>)
      Given the project has a file "notes.txt" containing "original"
      And a session for the project with permission mode auto
      And the model will <action> and then answer
      When the user sends a prompt
      Then the <tool> call was refused with <code>
      And nothing in the project changed

      Examples:
        | failure                       | action                                     | tool | code           |
        | a missing file is read        | read "missing.txt"                         | Read | FILE_NOT_FOUND |
        | a missing file is edited      | edit "missing.txt" replacing "original"    | Edit | FILE_NOT_FOUND |
        | the text to replace is absent | edit "notes.txt" replacing "not in there"  | Edit | EDIT_NO_MATCH  |

    @P9
    Scenario: Every call of a message gets exactly one result
      Given the project has a file "notes.txt" containing "original"
      And a session for the project in Plan mode
      And the model will read "notes.txt", read "missing.txt" and call TeleportFiles in one message, then answer
      When the user sends a prompt
      Then every call of that message got exactly one result: ok, FILE_NOT_FOUND and UNKNOWN_TOOL

    @P9
    Scenario: Every call of a cancelled message gets exactly one result
      Given the project has a file "notes.txt" containing "original"
      And a session for the project with permission mode auto
      And the model will run a waiting command and read "notes.txt" in one message
      When the user sends a prompt and cancels the turn while the command runs
      Then every call of that message got exactly one result

    @R1.3 @P9
    Scenario: The turn after a cancelled one answers every call the model is shown again
      Given the project has a file "notes.txt" containing "original"
      And a session for the project with permission mode auto
      And the model will run a waiting command and read "notes.txt" in one message
      And the user sent a prompt and cancelled the turn while the command ran
      And the model will answer "Understood."
      When the user sends another prompt
      Then the next turn gave the model the cancelled prompt and a result for each of its calls

    @P9
    Scenario: A file read in a session whose project folder is gone gets an error result, and the turn goes on
      Given a session for the project with permission mode auto
      And the project folder has been deleted
      And the model will read "notes.txt" and then answer
      When the user sends a prompt
      Then the Read call got an error result with a code from the catalog, and the turn went on

  Rule: A search the model asks for cannot stall the host (project rule P22)

    @P22
    Scenario Outline: A runaway search ends while another session is served (<kind>)
      Given the project has a file "long.txt" holding a line of 5000 "<letter>" ending with "!"
      And the project has a file "match.txt" containing "<match>"
      And a session for the project in Plan mode
      And another session is open for the same project
      And the model will search the project for "<pattern>" and then answer
      When the user sends a prompt and uses the other session while the search runs
      Then the other session was served while the search ran
      And the search ended with the matching file or with TOOL_FAILED

      Examples:
        | kind                   | letter | pattern  | match |
        | nested repetition      | a      | ^(a+)+$  | aaaa  |
        | overlapping repetition | x      | (x+x+)+y | xxy   |
