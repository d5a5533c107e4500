# A job that must be judged as failing: one check fails, one expected
# result is never printed (tests/vm/harness-negative.sh).
wh_run passes true
wh_run fails false
wh_exit
