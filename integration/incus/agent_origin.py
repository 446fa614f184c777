"""The agents' offline origin: every host name an agent's installer reaches,
served over HTTPS from one address in a test namespace (integration/incus/
agent_origin.sh starts it; the sandboxes reach it through their egress proxy
and its resolve file).

- The curl installers (claude, codex, opencode, cursor, pi): a stand-in
  installer script per agent, and the stand-in binary it downloads.
- nodejs.org: a Node.js distribution (this host's node and npm) for installers
  that bring their own.
- registry.npmjs.org: the npm registry protocol for the catalog's packages: the
  packument at GET /NAME (a scoped NAME as /@scope%2fname), whose
  dist.tarball is a .tgz served here, holding a package.json whose `bin` is a
  stand-in script that prints a version.

WORK/mode picks how they behave: ok, http-error, installer-fails, no-binary,
refused-host (the curl installers); npm-missing (the registry has no such
package), npm-refused-host (the tarball is on a host the allowlist refuses).
Every request is appended to WORK/requests as "HOST PATH".

Usage: agent_origin.py WORK ADDRESS   (WORK holds origin.pem, origin.key, npm/, node.tgz)
"""
import base64, hashlib, http.server, json, os, socketserver, ssl, sys, urllib.parse

work, addr = sys.argv[1], sys.argv[2]
# agent: (installer host, path, binary host, directory below $HOME)
CURL_AGENTS = {
    "claude": ("claude.ai", "/install.sh", "downloads.claude.ai", ".local/bin"),
    "codex": ("chatgpt.com", "/codex/install.sh", "releases.openai.com", ".local/bin"),
    "opencode": ("opencode.ai", "/install", "github.com", ".opencode/bin"),
    "cursor-agent": ("cursor.com", "/install", "api2.cursor.sh", ".local/bin"),
}
# pi's installer brings Node.js when the image has none, then installs pi from npm.
PI_INSTALLER = """set -e
if ! command -v npm >/dev/null 2>&1; then
  mkdir -p "$HOME/.local"
  curl -fsSL https://nodejs.org/dist/stand-in/node-linux-x64.tar.gz | tar -xz -C "$HOME/.local" --strip-components=1
  echo "stand-in installer: Node.js $("$HOME/.local/bin/node" --version) in ~/.local"
fi
npm install -g @mariozechner/pi-coding-agent
echo "stand-in installer: installed pi"
"""
NPM = "registry.npmjs.org"
# The catalog's npm packages (the tarballs agent_origin.sh packs in WORK/npm).
PACKAGES = {"@google/gemini-cli": "gemini", "@mariozechner/pi-coding-agent": "pi"}
VERSION = "9.9.9"


def curl_installer(binary, bin_host, directory, mode):
    if mode == "installer-fails":
        return "echo \"stand-in installer: no space left on device\" >&2\nexit 3\n"
    if mode == "no-binary":
        return "echo \"stand-in installer: done\"\n"
    host = "elsewhere.test" if mode == "refused-host" else bin_host
    return ("set -e\nmkdir -p \"$HOME/%s\"\ncurl -fsSL https://%s/bin/%s -o \"$HOME/%s/%s\"\n"
            "chmod 755 \"$HOME/%s/%s\"\necho \"stand-in installer: installed %s\"\n"
            % (directory, host, binary, directory, binary, directory, binary, binary))


def tarball_of(name):
    return os.path.join(work, "npm", name.split("/")[-1] + "-" + VERSION + ".tgz")


def packument(name, mode):
    """The registry's document of package NAME (None when it has none)."""
    if name not in PACKAGES or mode == "npm-missing":
        return None
    data = open(tarball_of(name), "rb").read()
    host = "elsewhere.test" if mode == "npm-refused-host" else NPM
    dist = {"tarball": "https://%s/%s/-/%s-%s.tgz" % (host, name, name.split("/")[-1], VERSION),
            "shasum": hashlib.sha1(data).hexdigest(),
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()}
    manifest = {"name": name, "version": VERSION, "bin": {PACKAGES[name]: "bin/cli.js"}, "dist": dist}
    return {"name": name, "dist-tags": {"latest": VERSION}, "versions": {VERSION: manifest}}


class Origin(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body, kind="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        host = (self.headers.get("Host") or "").split(":")[0]
        mode = open(os.path.join(work, "mode")).read().strip()
        with open(os.path.join(work, "requests"), "a") as log:
            log.write("%s %s\n" % (host, self.path))
        for binary, (ihost, path, bhost, directory) in CURL_AGENTS.items():
            if host == ihost and self.path == path:
                if mode == "http-error":
                    return self.reply(404, b"not here\n")
                return self.reply(200, curl_installer(binary, bhost, directory, mode).encode())
            if host == bhost and self.path == "/bin/" + binary:
                return self.reply(200, ("#!/bin/sh\necho \"%s 9.9.9 (agentctl test stand-in)\"\n" % binary).encode())
        if host == "pi.dev" and self.path == "/install.sh":
            return self.reply(200, PI_INSTALLER.encode())
        if host == "nodejs.org" and self.path == "/dist/stand-in/node-linux-x64.tar.gz":
            return self.reply(200, open(os.path.join(work, "node.tgz"), "rb").read(), "application/gzip")
        if host == NPM:
            name = urllib.parse.unquote(self.path.split("?")[0])[1:]
            if "/-/" in name and name.split("/-/")[0] in PACKAGES and mode != "npm-missing":
                return self.reply(200, open(tarball_of(name.split("/-/")[0]), "rb").read(), "application/octet-stream")
            doc = packument(name, mode)
            if doc is not None:
                return self.reply(200, json.dumps(doc).encode(), "application/json")
            return self.reply(404, b'{"error":"Not found"}', "application/json")
        self.reply(404, b"no such thing here\n")

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    allow_reuse_address = True
    daemon_threads = True

    def server_bind(self):  # skips the reverse DNS lookup of HTTPServer
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "origin", 443


server = Server((addr, 443), Origin)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(os.path.join(work, "origin.pem"), os.path.join(work, "origin.key"))
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
