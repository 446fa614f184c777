"""TCP relays the Incus suites run (each connection on threads of its own).

  tcp_relay.py relay ADDR PORT UP_ADDR UP_PORT
      forwards every connection to ADDR:PORT to UP_ADDR:UP_PORT (a connection
      the upstream refuses is closed; the relay keeps serving)
  tcp_relay.py connect-proxy ADDR
      answers HTTP CONNECT on ADDR:3128 and dials the target from ADDR: a
      stand-in for an egress proxy, run by something that took its address
"""
import socket
import sys
import threading


def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def join(a, b):
    for x, y in ((a, b), (b, a)):
        threading.Thread(target=pipe, args=(x, y), daemon=True).start()


def relay(addr, port, up_addr, up_port):
    listener = socket.create_server((addr, int(port)))
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection((up_addr, int(up_port)), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        join(client, upstream)


def connect_proxy(addr):
    def serve(client):
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(1)
            if not data:
                return
            head += data
        host, port = head.split()[1].decode().rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)), source_address=(addr, 0))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        join(client, upstream)

    listener = socket.create_server((addr, 3128))
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1:2] == ["relay"] and len(sys.argv) == 6:
        relay(*sys.argv[2:])
    elif sys.argv[1:2] == ["connect-proxy"] and len(sys.argv) == 3:
        connect_proxy(sys.argv[2])
    else:
        sys.exit(__doc__)
