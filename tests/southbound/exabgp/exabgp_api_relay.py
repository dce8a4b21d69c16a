#!/usr/bin/python3
"""exabgp API helper process: relays exabgp's API to the interop test.

exabgp runs this as a `process` (`run ... exabgp_api_relay.py PORT`): what
exabgp writes to our stdin (JSON events and command acks) goes to the test's
TCP socket on 127.0.0.1:PORT, and the test's lines (API commands such as
`announce route ...`) go to our stdout, which exabgp reads.
"""
import socket
import sys
import threading


def main():
    sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    sock.settimeout(None)

    def from_test():
        f = sock.makefile("r")
        for line in f:
            sys.stdout.write(line)
            sys.stdout.flush()
        # The test closed its end: stop exabgp's helper.
        sys.stdout.close()

    t = threading.Thread(target=from_test, daemon=True)
    t.start()
    for line in sys.stdin:
        try:
            sock.sendall(line.encode())
        except OSError:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
