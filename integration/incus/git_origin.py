"""A git origin over HTTPS for the credential suite (integration/incus/
secrets.sh): git's smart HTTP protocol, served by `git http-backend` (CGI) for
the repositories below ROOT, and only to a client whose Basic credentials
carry the token in TOKEN_FILE as their password (anything else: 401 with a
Basic challenge, as a git host answers). Each request is appended to LOG as
"METHOD PATH auth=ok|none|wrong AUTHORIZATION-AS-IT-ARRIVED". Prints
`listening` once it accepts.

Usage: git_origin.py ADDRESS CERT KEY ROOT TOKEN_FILE LOG
"""
import base64, http.server, os, socketserver, ssl, subprocess, sys, threading

address, cert, key, root, token_file, log = sys.argv[1:7]
with open(token_file) as f:
    token = f.read().strip()
log_lock = threading.Lock()


def read_chunked(stream):
    body = b""
    while True:
        size = int(stream.readline().split(b";")[0], 16)
        if size == 0:
            while stream.readline() not in (b"\r\n", b"\n", b""):
                pass
            return body
        body += stream.read(size)
        stream.readline()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def credentials(self):
        header = self.headers.get("Authorization", "")
        if not header:
            return "none"
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return "wrong"
        try:
            _, _, password = base64.b64decode(encoded.strip()).decode().partition(":")
        except ValueError:
            return "wrong"
        return "ok" if password == token else "wrong"

    def answer(self, status, headers, payload):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def serve(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = read_chunked(self.rfile)
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        state = self.credentials()
        with log_lock, open(log, "a") as f:
            f.write("%s %s auth=%s %s\n" % (self.command, self.path, state, self.headers.get("Authorization", "")))
        if state != "ok":
            self.answer(401, [("WWW-Authenticate", 'Basic realm="git"')], b"authentication required\n")
            return
        path, _, query = self.path.partition("?")
        env = {"GIT_PROJECT_ROOT": root, "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path, "QUERY_STRING": query,
               "REQUEST_METHOD": self.command, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": "x-access-token",
               "REMOTE_ADDR": self.client_address[0], "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for name, value in self.headers.items():
            env["HTTP_" + name.upper().replace("-", "_")] = value
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.answer(status, headers, payload)

    do_GET = serve
    do_POST = serve


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def server_bind(self):
        # HTTPServer's own looks the address up in DNS, which the namespace has none of.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


server = Server((address, 443), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print("listening", flush=True)
server.serve_forever()
