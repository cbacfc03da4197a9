"""A reserving server's token bucket replayed from its counts: levels computed by hand."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.calls.server_bucket import EVENTS_MAX, ServerBucket, given_back

RATE, MINUTE = 1_000.0, 60_000.0  # 1,000 tokens a second in a bucket of a minute


def test_a_give_back_the_server_made_after_a_count_is_replayed_after_it():
    server = ServerBucket((0.0, MINUTE, 0))
    server.took(1, 0.0, 10_000)
    server.took(2, 0.0, 10_000)  # 40,000 left
    server.gave_back(1.0, 9_000)  # call 1's answer: it wrote 1,000 of its cap
    # call 2's count, taken when the server admitted it (10 ms after the grant): 40,010
    miss, level = server.follow(2, 0.0, 0.01, 40_010, 2.0, RATE, MINUTE)
    assert miss == pytest.approx(0.0)  # as predicted: the server charged what we did
    # 40,010 + 990 of refill + 9,000 given back + 1,000 of refill (a difference from the grant
    # less every move since would have put it at 41,000: the give-back read as our miss)
    assert level == pytest.approx(51_000)


def test_a_give_back_too_near_the_grant_to_place_leaves_the_count_unused():
    server = ServerBucket((0.0, MINUTE, 0))
    server.took(1, 0.0, 20_000)
    server.took(2, 1.0, 10_000)
    server.gave_back(1.02, 9_000)  # 20 ms after call 2's grant: before or after its admission?
    assert server.follow(2, 1.0, 1.01, 31_010, 2.0, RATE, MINUTE) is None
    # call 3's count is placed well after it: replayed from the start, the give-back included
    server.took(3, 1.5, 5_000)
    miss, level = server.follow(3, 1.5, 1.51, 35_510, 3.0, RATE, MINUTE)
    # 60,000 - 20,000 (+1,000 of refill by 1 s) - 10,000 + 9,000 - 5,000 (+510 by 1.51 s)
    assert miss == pytest.approx(0.0)
    assert level == pytest.approx(35_510 + 1_490)


def test_a_narrower_window_places_a_give_back_the_fixed_one_cannot():
    # As above, for an endpoint whose connections take 0.5 ms: a window of 11 ms, and the
    # give-back 20 ms after call 2's grant was made after the server admitted it
    server = ServerBucket((0.0, MINUTE, 0), ambiguous_s=0.011)
    server.took(1, 0.0, 20_000)
    server.took(2, 1.0, 10_000)
    server.gave_back(1.02, 9_000)
    miss, level = server.follow(2, 1.0, 1.01, 31_010, 2.0, RATE, MINUTE)
    # 60,000 - 20,000 (+1,000 of refill by 1 s) - 10,000 (+10 by 1.01 s) = 31,010, as counted
    assert miss == pytest.approx(0.0)
    # 31,010 + 10 of refill + 9,000 given back + 980 of refill by 2 s
    assert level == pytest.approx(41_000)
    # the window is the limiter's to change: widened again, the next give-back as near is not placed
    server.ambiguous_s = 0.05
    server.took(3, 2.5, 1_000)
    server.gave_back(2.52, 500)
    assert server.follow(3, 2.5, 2.51, 41_010, 3.0, RATE, MINUTE) is None


def test_a_give_back_just_after_a_grant_counts_as_made_first_where_that_is_lower():
    # Logged: a call of 5,978 granted at a full bucket of 4,715; a give-back of 961 reached us 2 ms
    # later, but the server had made it first, full, and lost it: the level stays where the call left it
    assert given_back(4_715 - 5_978, 961, 4_715, 5_978) == pytest.approx(4_715 - 5_978)
    # with no call granted in the last AMBIGUOUS_S it is all kept
    assert given_back(-1_263, 961, 4_715, 0) == pytest.approx(-302)
    # the bucket held 4,000 before a take of 3,000: made first, 715 of it fit under the size
    assert given_back(1_000, 961, 4_715, 3_000) == pytest.approx(1_715)
    # replayed alike: full, a take of 5,978, the give-back 2 ms later
    server = ServerBucket((0.0, 4_715, 0))
    server.took(1, 0.0, 5_978)
    server.gave_back(0.002, 961)
    assert server.at_most(0, -1.0, -1.0, 4_715, 0.002, 0.0, 4_715) == pytest.approx(4_715 - 5_978)


def test_a_prediction_lowered_by_a_give_back_of_unknown_order_teaches_nothing():
    capacity = RATE  # one second of quota
    server = ServerBucket((0.0, capacity, 0))
    server.took(1, 1.5, 1_200)  # full at 1.5 s: -200
    # 2 ms after that grant: replayed as made first, at a full bucket, and lost (-198)
    server.gave_back(1.502, 900)
    server.took(2, 2.0, 300)  # -198 + 498 of refill - 300 = 0; 10 by its admission
    # The server had made it after admitting call 1: 702, full by 2.0 s, 700 after call 2, and 710
    # when it counted. The 700 above the prediction is the give-back, not prompts charged 700 less.
    miss, level = server.follow(2, 2.0, 2.01, 710, 3.0, RATE, capacity)
    assert miss is None
    assert level == pytest.approx(capacity)  # the count is followed all the same: 710 + 990, held at the size

    # A give-back as near a grant that fits either way (the bucket far from full) still teaches
    server = ServerBucket((0.0, -1_300, 0))  # 200 by 1.5 s
    server.took(1, 1.5, 100)
    server.gave_back(1.502, 50)  # 152 in either order: the call took 100 of a bucket with room
    server.took(2, 2.0, 300)  # 152 + 498 - 300 = 350; 360 by its admission
    miss, _ = server.follow(2, 2.0, 2.01, 410, 3.0, RATE, capacity)  # the server charged call 2 250
    assert miss == pytest.approx(50)


def test_a_bucket_of_a_second_is_replayed_with_its_debt_and_its_size():
    capacity = RATE  # one second of quota
    server = ServerBucket((0.0, capacity, 0))
    server.took(1, 0.0, 3_000)  # a prompt of 500 and a cap of 2,500: -2,000
    server.took(2, 0.6, 1_000)  # -1,400 by then, -2,400 after
    server.gave_back(0.7, 2_500)  # call 1 wrote nothing: -2,300 + 2,500 = 200
    miss, level = server.follow(2, 0.6, 0.61, -2_390, 2.0, RATE, capacity)
    assert miss == pytest.approx(0.0)
    assert level == pytest.approx(capacity)  # 200 + 1.3 s of refill, held at the bucket's size


def test_what_the_count_holds_beyond_the_prediction_is_the_servers_cheaper_prompts():
    server = ServerBucket((0.0, MINUTE, 0))
    server.took(1, 0.0, 5_000)
    server.took(2, 0.0, 3_000)
    # the server charged 4,800 and 2,900: 52,300 left, and 10 ms of refill when it counted call 2
    miss, _ = server.follow(2, 0.0, 0.01, 52_310, 1.0, RATE, MINUTE)
    assert miss == pytest.approx(300)
    # the next count is predicted from this one: only the calls since are in it
    server.took(3, 1.0, 2_000)
    miss, _ = server.follow(3, 1.0, 1.01, 52_310 + 1_000 - 1_900, 2.0, RATE, MINUTE)
    assert miss == pytest.approx(100)


def test_a_refused_call_was_charged_nothing():
    server = ServerBucket((0.0, MINUTE, 0))
    server.took(1, 0.0, 5_000)
    server.took(2, 0.0, 5_000)
    server.refused(2)  # a 429
    server.took(3, 0.5, 5_000)
    # 60,000 - 5,000, 500 of refill by 0.5 s, - 5,000, and 10 more by its admission
    miss, level = server.follow(3, 0.5, 0.51, 50_510, 1.0, RATE, MINUTE)
    assert miss == pytest.approx(0.0)  # not 5,000 below: call 2 took nothing
    assert level == pytest.approx(51_000)


def test_a_count_floored_at_zero_only_bounds_the_level_and_moves_nothing():
    server = ServerBucket((0.0, MINUTE, 0))
    server.took(1, 0.0, 70_000)  # into debt: the server says 0 left
    server.took(2, 0.5, 1_000)
    assert server.at_most(1, 0.0, 0.01, 0.0, 1.0, RATE, MINUTE) == pytest.approx(0.0 + 990 - 1_000)
    # the anchor is still the start: call 2's count is predicted from there
    miss, _ = server.follow(2, 0.5, 0.51, -10_000 + 510 - 1_000, 1.0, RATE, MINUTE)
    assert miss == pytest.approx(0.0)


def test_without_a_known_start_the_first_count_predicts_nothing():
    server = ServerBucket()
    server.took(1, 0.0, 5_000)
    miss, level = server.follow(1, 0.0, 0.01, 3_000, 1.0, RATE, MINUTE)
    assert miss is None and level == pytest.approx(3_990)
    server.took(2, 1.0, 2_000)
    miss, _ = server.follow(2, 1.0, 1.01, 3_990 + 10 - 1_900, 2.0, RATE, MINUTE)
    assert miss == pytest.approx(100)  # the second is predicted from the first


def test_with_no_count_the_record_stays_bounded_and_the_next_count_predicts_nothing():
    server = ServerBucket((0.0, MINUTE, 0))
    for seq in range(1, EVENTS_MAX + 11):
        server.took(seq, seq * 0.001, 1)
    assert len(server) == EVENTS_MAX
    miss, level = server.follow(EVENTS_MAX + 10, (EVENTS_MAX + 10) * 0.001, 5.0, 1_000, 6.0, RATE, MINUTE)
    assert miss is None  # events were dropped: no prediction to learn from
    assert level == pytest.approx(2_000) and len(server) == 0
