# Build step of deploy/man/CMakeLists.txt: write OUT from IN with its line
# "@KEYS@" replaced by the key list `TOOLGATE __man-keys` prints from the
# config key table (config/keys.c), so toolgate.json(5) cannot drift from
# the keys the loader accepts.
execute_process(COMMAND ${TOOLGATE} __man-keys
                OUTPUT_VARIABLE keys RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TOOLGATE} __man-keys failed (${rc})")
endif()
file(READ ${IN} text)
string(FIND "${text}" "\n@KEYS@\n" at)
if(at LESS 0)
  message(FATAL_ERROR "${IN}: no @KEYS@ line")
endif()
string(REPLACE "\n@KEYS@\n" "\n${keys}" text "${text}")
file(WRITE ${OUT}.tmp "${text}")
file(RENAME ${OUT}.tmp ${OUT})
