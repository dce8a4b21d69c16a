"""Helpers shared by the BGP peer tests (gobgp_interop_test, bgp_hardening_test)."""
import time


def wait_for(what, pred, timeout=20.0):
    """pred()'s first truthy value, polled every 0.1 s (exceptions retried) until
    `timeout`; AssertionError naming `what` and the last value otherwise."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = pred()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")
