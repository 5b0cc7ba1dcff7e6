/**
 * How the k8s discovery source reaches an API server, against a fake HTTPS API server on
 * 127.0.0.1 that replays the recorded ServiceList (plugins/discovery-k8s/testdata) and checks
 * credentials as kube-apiserver does: a bearer token, or a client certificate signed by its CA
 * (node:https with requestCert, since Deno.serve cannot require one). Certificates are made per
 * run with openssl; kubeconfigs, exec plugins and the service account mount live in a temp dir.
 */
import assert from "node:assert/strict";
import https from "node:https";
import type { TLSSocket } from "node:tls";
import type { AddressInfo } from "node:net";
import { stringify } from "yaml";
import { ManualClock, systemClock } from "../../core/support/clock.ts";
import { needsBinary } from "../support/needs_binary.ts";
import { K8sSource } from "../../plugins/discovery-k8s/k8s_source.ts";
import {
  type K8sConnection,
  resolveConnection,
  TOKEN_FILE_TTL_MS,
} from "../../plugins/discovery-k8s/connection.ts";
import {
  MAX_EXEC_OUTPUT_BYTES,
  runExecCredential,
} from "../../plugins/discovery-k8s/exec_credential.ts";

const TESTDATA = new URL("../../plugins/discovery-k8s/testdata/", import.meta.url);
const SERVICES = await Deno.readTextFile(new URL("services_list.json", TESTDATA));
const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const UNAUTHORIZED = JSON.stringify({
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message: "Unauthorized",
  reason: "Unauthorized",
  code: 401,
});

/** A CA, a server certificate for 127.0.0.1 and a client certificate (CN alice), in `dir`. */
async function makeCertificates(dir: string): Promise<void> {
  const run = async (...args: string[]) => {
    const { success, stderr } = await new Deno.Command("openssl", { args, cwd: dir }).output();
    if (!success) throw new Error(`openssl ${args[0]}: ${new TextDecoder().decode(stderr)}`);
  };
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  await run(
    "req",
    "-x509",
    ...ec,
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
    "-days",
    "1",
    "-subj",
    "/CN=test-ca",
  );
  await Deno.writeTextFile(
    `${dir}/server.ext`,
    "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
  );
  await Deno.writeTextFile(`${dir}/client.ext`, "extendedKeyUsage=clientAuth\n");
  for (
    const [name, subject] of [["server", "/CN=kube-apiserver"], ["client", "/CN=alice/O=devs"]]
  ) {
    await run("req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject!);
    await run(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.crt",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.crt`,
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
    );
  }
  // A second CA that signed nothing here: trusting it alone must fail.
  await run(
    "req",
    "-x509",
    ...ec,
    "-keyout",
    "other.key",
    "-out",
    "other.crt",
    "-days",
    "1",
    "-subj",
    "/CN=other-ca",
  );
}

/** What the fake API server saw of one request. */
interface Seen {
  path: string;
  authorization: string | undefined;
  clientCn: string | undefined;
}

/** A fake kube-apiserver over TLS: `accept` decides from what it saw whether to answer 200. */
async function fakeApiServer(
  dir: string,
  options: { requireClientCert?: boolean; accept: (seen: Seen) => boolean },
) {
  const read = (name: string) => Deno.readTextFileSync(`${dir}/${name}`);
  const seen: Seen[] = [];
  const server = https.createServer({
    key: read("server.key"),
    cert: read("server.crt"),
    ca: read("ca.crt"),
    requestCert: options.requireClientCert ?? false,
    rejectUnauthorized: options.requireClientCert ?? false,
  }, (request, response) => {
    const socket = request.socket as TLSSocket;
    const peer = options.requireClientCert ? socket.getPeerCertificate() : undefined;
    const cn = peer?.subject?.CN;
    const entry: Seen = {
      path: request.url ?? "",
      authorization: request.headers.authorization,
      clientCn: Array.isArray(cn) ? cn[0] : cn,
    };
    seen.push(entry);
    const ok = entry.path === "/api/v1/services" && options.accept(entry);
    response.writeHead(ok ? 200 : 401, { "content-type": "application/json" });
    response.end(ok ? SERVICES : UNAUTHORIZED);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const b64 = (text: string) => btoa(text);

/** A kubeconfig document with the given clusters, users and contexts. */
function kubeconfig(parts: {
  current?: string;
  clusters?: Record<string, Record<string, unknown>>;
  users?: Record<string, Record<string, unknown>>;
  contexts?: Record<string, { cluster: string; user: string }>;
}): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    ...(parts.current ? { "current-context": parts.current } : {}),
    clusters: Object.entries(parts.clusters ?? {}).map(([name, cluster]) => ({ name, cluster })),
    users: Object.entries(parts.users ?? {}).map(([name, user]) => ({ name, user })),
    contexts: Object.entries(parts.contexts ?? {}).map(([name, context]) => ({ name, context })),
  });
}

/** The ids the source lists through `connection`, which is closed afterwards. */
async function listIds(connection: K8sConnection): Promise<string[]> {
  try {
    const source = new K8sSource({ api: connection.api, fetch: connection.fetch });
    return (await source.list()).map((c) => c.id);
  } finally {
    connection.close();
  }
}

const LISTED = ["tools/weather-mcp", "tools/legacy-sse"];

/** The tests that make certificates. */
const OPENSSL = needsBinary("openssl", ["openssl"], "apt-get install -y openssl");

/** A fake API server with `options` over certificates in a fresh directory, for `fn`; both gone after. */
async function withApiServer(
  options: Parameters<typeof fakeApiServer>[1],
  fn: (dir: string, api: Awaited<ReturnType<typeof fakeApiServer>>) => Promise<void>,
): Promise<void> {
  await withDir(async (dir) => {
    const api = await fakeApiServer(dir, options);
    try {
      await fn(dir, api);
    } finally {
      await api.close();
    }
  });
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "k8s-auth-" });
  try {
    await makeCertificates(dir);
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test(
  "kubeconfig: the current-context's server, CA data and bearer token reach the API",
  OPENSSL,
  async () => {
    await withApiServer(
      { accept: (s) => s.authorization === "Bearer s3cret" },
      async (dir, api) => {
        const ca = await Deno.readTextFile(`${dir}/ca.crt`);
        await Deno.writeTextFile(
          `${dir}/config`,
          kubeconfig({
            current: "dev",
            clusters: { dev: { server: api.url, "certificate-authority-data": b64(ca) } },
            users: { dev: { token: "s3cret" } },
            contexts: { dev: { cluster: "dev", user: "dev" } },
          }),
        );
        const connection = await resolveConnection({
          env: { KUBECONFIG: `${dir}/config` },
          clock: systemClock,
        });
        assert.equal(connection.origin, 'kubeconfig context "dev"');
        assert.deepEqual(await listIds(connection), LISTED);
        assert.deepEqual(api.seen.map((s) => s.authorization), ["Bearer s3cret"]);
      },
    );
  },
);

Deno.test(
  "kubeconfig: a client certificate and key from files (relative to the kubeconfig) pass an API server that requires one",
  OPENSSL,
  async () => {
    await withApiServer({
      requireClientCert: true,
      accept: (s) => s.clientCn === "alice" && s.authorization === undefined,
    }, async (dir, api) => {
      await Deno.writeTextFile(
        `${dir}/config`,
        kubeconfig({
          current: "mtls",
          clusters: { mtls: { server: api.url, "certificate-authority": "ca.crt" } },
          users: { alice: { "client-certificate": "client.crt", "client-key": "client.key" } },
          contexts: { mtls: { cluster: "mtls", user: "alice" } },
        }),
      );
      const connection = await resolveConnection({
        env: { KUBECONFIG: `${dir}/config` },
        clock: systemClock,
      });
      assert.deepEqual(await listIds(connection), LISTED);
      assert.deepEqual(api.seen.map((s) => s.clientCn), ["alice"]);
    });
  },
);

Deno.test(
  "kubeconfig: client-certificate-data and client-key-data work inline, and without them the API server refuses the handshake",
  OPENSSL,
  async () => {
    await withApiServer({
      requireClientCert: true,
      accept: (s) => s.clientCn === "alice",
    }, async (dir, api) => {
      const file = (name: string) => Deno.readTextFile(`${dir}/${name}`);
      const cluster = {
        server: api.url,
        "certificate-authority-data": b64(await file("ca.crt")),
      };
      await Deno.writeTextFile(
        `${dir}/config`,
        kubeconfig({
          current: "inline",
          clusters: { c: cluster },
          users: {
            inline: {
              "client-certificate-data": b64(await file("client.crt")),
              "client-key-data": b64(await file("client.key")),
            },
            nobody: { token: "not-a-certificate" },
          },
          contexts: {
            inline: { cluster: "c", user: "inline" },
            anonymous: { cluster: "c", user: "nobody" },
          },
        }),
      );
      const env = { KUBECONFIG: `${dir}/config` };
      assert.deepEqual(
        await listIds(await resolveConnection({ env, clock: systemClock })),
        LISTED,
      );
      await assert.rejects(
        listIds(await resolveConnection({ env, context: "anonymous", clock: systemClock })),
        /kubeconfig context "anonymous"\): .* unreachable: /,
      );
    });
  },
);

Deno.test(
  "kubeconfig: the server is verified against the cluster's CA, not any CA",
  OPENSSL,
  async () => {
    await withApiServer({ accept: () => true }, async (dir, api) => {
      await Deno.writeTextFile(
        `${dir}/config`,
        kubeconfig({
          current: "wrong-ca",
          clusters: { wrong: { server: api.url, "certificate-authority": `${dir}/other.crt` } },
          users: { u: { token: "t" } },
          contexts: { "wrong-ca": { cluster: "wrong", user: "u" } },
        }),
      );
      const connection = await resolveConnection({
        env: { KUBECONFIG: `${dir}/config` },
        clock: systemClock,
      });
      await assert.rejects(
        listIds(connection),
        /discovery-k8s \(kubeconfig context "wrong-ca"\): https:\/\/127\.0\.0\.1:\d+\/api\/v1\/services unreachable: .*(certificate|UnknownIssuer)/i,
      );
      assert.deepEqual(api.seen, []);
    });
  },
);

/** Writes `${dir}/config`: context `dev` on `server` (CA `ca.crt`), its user the exec plugin `exec`. */
async function writeExecKubeconfig(
  dir: string,
  server: string,
  exec: Record<string, unknown>,
): Promise<void> {
  await Deno.writeTextFile(
    `${dir}/config`,
    kubeconfig({
      current: "dev",
      clusters: { dev: { server, "certificate-authority": "ca.crt" } },
      users: { dev: { exec } },
      contexts: { dev: { cluster: "dev", user: "dev" } },
    }),
  );
}

/** An exec credential plugin: prints `exec-token-<n>` for its n-th run, expiring at `expiry`. */
async function writeExecPlugin(dir: string, expiry: string): Promise<string> {
  const path = `${dir}/bin/fake-auth-plugin`;
  await Deno.mkdir(`${dir}/bin`, { recursive: true });
  await Deno.writeTextFile(
    path,
    `#!/bin/sh
# Refuses to run outside the exec protocol, like real plugins that read KUBERNETES_EXEC_INFO.
case "$KUBERNETES_EXEC_INFO" in *'"kind":"ExecCredential"'*) ;; *) echo "no exec info" >&2; exit 3;; esac
[ "$1" = "get-token" ] && [ "$2" = "--cluster=dev" ] || { echo "bad args: $*" >&2; exit 4; }
n=$(( $(cat "$COUNTER" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$COUNTER"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token-%s","expirationTimestamp":"${expiry}"}}\\n' "$n"
`,
  );
  await Deno.chmod(path, 0o755);
  return path;
}

Deno.test(
  "kubeconfig exec plugin: its ExecCredential token is sent, kept until expirationTimestamp, then fetched again",
  OPENSSL,
  async () => {
    await withDir(async (dir) => {
      const counter = `${dir}/runs`;
      const current = () => `Bearer exec-token-${Deno.readTextFileSync(counter).trim()}`;
      const api = await fakeApiServer(dir, { accept: (s) => s.authorization === current() });
      const expiry = "2030-01-01T00:00:00Z";
      const clock = new ManualClock(Date.parse(expiry) - 60_000);
      try {
        await writeExecPlugin(dir, expiry);
        await writeExecKubeconfig(dir, api.url, {
          apiVersion: "client.authentication.k8s.io/v1",
          command: "./bin/fake-auth-plugin", // relative to the kubeconfig's directory
          args: ["get-token", "--cluster=dev"],
          env: [{ name: "COUNTER", value: counter }],
          interactiveMode: "Never",
        });
        const connection = await resolveConnection({ env: { KUBECONFIG: `${dir}/config` }, clock });
        try {
          const source = new K8sSource({ api: connection.api, fetch: connection.fetch });
          assert.deepEqual((await source.list()).map((c) => c.id), LISTED);
          assert.deepEqual((await source.list()).map((c) => c.id), LISTED);
          clock.advance(60_000); // past expirationTimestamp
          assert.deepEqual((await source.list()).map((c) => c.id), LISTED);
        } finally {
          connection.close();
        }
        assert.deepEqual(api.seen.map((s) => s.authorization), [
          "Bearer exec-token-1",
          "Bearer exec-token-1",
          "Bearer exec-token-2",
        ]);
      } finally {
        await api.close();
      }
    });
  },
);

Deno.test(
  "kubeconfig exec plugin: a 401 (a revoked token) runs the plugin again once, and its new token is used",
  OPENSSL,
  async () => {
    // The API server has already revoked the first token the plugin hands out.
    await withApiServer(
      { accept: (s) => s.authorization === "Bearer exec-token-2" },
      async (dir, api) => {
        await writeExecPlugin(dir, "2030-01-01T00:00:00Z");
        await writeExecKubeconfig(dir, api.url, {
          apiVersion: "client.authentication.k8s.io/v1",
          command: `${dir}/bin/fake-auth-plugin`,
          args: ["get-token", "--cluster=dev"],
          env: [{ name: "COUNTER", value: `${dir}/runs` }],
        });
        const connection = await resolveConnection({
          env: { KUBECONFIG: `${dir}/config` },
          clock: systemClock,
        });
        assert.deepEqual(await listIds(connection), LISTED);
        assert.deepEqual(api.seen.map((s) => s.authorization), [
          "Bearer exec-token-1",
          "Bearer exec-token-2",
        ]);
      },
    );
  },
);

Deno.test(
  "kubeconfig exec plugin: a client certificate and key in its ExecCredential pass an API server that requires one",
  OPENSSL,
  async () => {
    await withApiServer({
      requireClientCert: true,
      accept: (s) => s.clientCn === "alice",
    }, async (dir, api) => {
      const credential = JSON.stringify({
        apiVersion: "client.authentication.k8s.io/v1beta1",
        kind: "ExecCredential",
        status: {
          clientCertificateData: await Deno.readTextFile(`${dir}/client.crt`),
          clientKeyData: await Deno.readTextFile(`${dir}/client.key`),
        },
      });
      await Deno.writeTextFile(`${dir}/credential.json`, credential);
      await writeExecKubeconfig(dir, api.url, {
        apiVersion: "client.authentication.k8s.io/v1beta1",
        command: "cat",
        args: [`${dir}/credential.json`],
      });
      const connection = await resolveConnection({
        env: { KUBECONFIG: `${dir}/config` },
        clock: systemClock,
      });
      assert.deepEqual(await listIds(connection), LISTED);
      assert.deepEqual(api.seen.map((s) => [s.clientCn, s.authorization]), [[
        "alice",
        undefined,
      ]]);
    });
  },
);

Deno.test(
  "kubeconfig exec plugin: a failing plugin is named with its stderr",
  OPENSSL,
  async () => {
    await withApiServer({ accept: () => true }, async (dir, api) => {
      await writeExecPlugin(dir, "2030-01-01T00:00:00Z");
      await writeExecKubeconfig(dir, api.url, {
        apiVersion: "client.authentication.k8s.io/v1",
        command: `${dir}/bin/fake-auth-plugin`,
        args: ["wrong"],
      });
      const connection = await resolveConnection({
        env: { KUBECONFIG: `${dir}/config` },
        clock: systemClock,
      });
      await assert.rejects(
        listIds(connection),
        /exec credential plugin ".*fake-auth-plugin" exited with 4: bad args: wrong/,
      );
      assert.deepEqual(api.seen, []);
    });
  },
);

Deno.test("an exec plugin is bounded: one that hangs is stopped at its deadline, one that floods stdout is stopped at 1 MiB, a missing one names its install hint", async () => {
  const exec = (command: string, args: string[], installHint?: string) => ({
    apiVersion: "client.authentication.k8s.io/v1",
    command,
    args,
    env: {},
    ...(installHint ? { installHint } : {}),
  });
  await assert.rejects(
    runExecCredential(exec("sh", ["-c", "exec sleep 30"]), { timeoutMs: 200 }),
    /exec credential plugin "sh" did not answer within 200 ms/,
  );
  await assert.rejects(
    runExecCredential(exec("sh", ["-c", "exec yes"]), { timeoutMs: 20_000 }),
    new RegExp(`exec credential plugin "sh" printed more than ${MAX_EXEC_OUTPUT_BYTES} bytes`),
  );
  await assert.rejects(
    runExecCredential(
      exec("kubelogin-not-installed", [], "Install kubelogin: https://example.invalid"),
      {
        timeoutMs: 5_000,
      },
    ),
    /exec credential plugin "kubelogin-not-installed" could not run: .*; Install kubelogin/,
  );
  // Noise on stderr is no failure; a wrong kind on stdout is.
  await assert.rejects(
    runExecCredential(
      exec("sh", [
        "-c",
        `head -c 100000 /dev/zero >&2; echo '{"kind":"Secret","apiVersion":"v1"}'`,
      ]),
      { timeoutMs: 5_000 },
    ),
    /printed no ExecCredential of apiVersion client\.authentication\.k8s\.io\/v1/,
  );
});

Deno.test(
  "discover --plugin k8s --context picks that context's cluster and user from a merged KUBECONFIG",
  OPENSSL,
  async () => {
    await withApiServer({
      accept: (s) => s.authorization === "Bearer staging-token",
    }, async (dir, api) => {
      const ca = b64(await Deno.readTextFile(`${dir}/ca.crt`));
      const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const gone = `https://127.0.0.1:${closed.addr.port}`;
      closed.close();
      // The first file's current-context points at a server that is not there.
      await Deno.writeTextFile(
        `${dir}/a.yaml`,
        kubeconfig({
          current: "prod",
          clusters: { prod: { server: gone, "certificate-authority-data": ca } },
          users: { prod: { token: "prod-token" } },
          contexts: { prod: { cluster: "prod", user: "prod" } },
        }),
      );
      // The second file's "prod" cluster loses to the first file's: the first to define a name wins.
      await Deno.writeTextFile(
        `${dir}/b.yaml`,
        kubeconfig({
          current: "staging",
          clusters: {
            staging: { server: api.url, "certificate-authority-data": ca },
            prod: { server: api.url, "certificate-authority-data": ca },
          },
          users: { staging: { token: "staging-token" } },
          contexts: { staging: { cluster: "staging", user: "staging" } },
        }),
      );
      const env = {
        KUBECONFIG: `${dir}/a.yaml:${dir}/missing.yaml:${dir}/b.yaml`,
        NO_COLOR: "1",
      };
      const run = async (...args: string[]) => {
        const output = await new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "--allow-read",
            "--allow-write",
            "--allow-net",
            "--allow-env",
            "--allow-run",
            "--allow-sys",
            MAIN,
            "discover",
            "--plugin",
            "k8s",
            "--json",
            "--timeout",
            "2",
            ...args,
          ],
          env,
          clearEnv: false,
          stdout: "piped",
          stderr: "piped",
        }).output();
        const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
        return { code: output.code, out: text(output.stdout), err: text(output.stderr) };
      };
      const staging = await run("--context", "staging");
      assert.equal(staging.code, 0, staging.err);
      assert.deepEqual(
        JSON.parse(staging.out).candidates.map((c: { id: string }) => c.id).sort(),
        [...LISTED].sort(),
      );
      assert.ok(
        api.seen.length > 0 && api.seen.every((s) => s.authorization === "Bearer staging-token"),
      );

      const current = await run();
      assert.equal(current.code, 1);
      assert.match(
        current.err,
        new RegExp(`context "prod"\\): ${gone}/api/v1/services unreachable`),
      );

      const unknown = await run("--context", "nope");
      assert.equal(unknown.code, 1);
      assert.match(unknown.err, /has no context "nope"; contexts: prod, staging/);
    });
  },
);

Deno.test(
  "in cluster: the service account's token and CA and KUBERNETES_SERVICE_HOST/PORT reach the API; a rotated token is read again",
  OPENSSL,
  async () => {
    await withDir(async (dir) => {
      const account = `${dir}/serviceaccount`;
      await Deno.mkdir(account);
      await Deno.copyFile(`${dir}/ca.crt`, `${account}/ca.crt`);
      await Deno.writeTextFile(`${account}/token`, "sa-token-1\n");
      const api = await fakeApiServer(dir, {
        accept: (s) =>
          s.authorization === `Bearer ${Deno.readTextFileSync(`${account}/token`).trim()}`,
      });
      const clock = new ManualClock(1_000);
      try {
        const port = new URL(api.url).port;
        const connection = await resolveConnection({
          env: { KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: port, HOME: dir },
          clock,
          serviceAccountDir: account,
        });
        try {
          assert.equal(connection.origin, "in-cluster service account");
          assert.equal(connection.api, `https://127.0.0.1:${port}`);
          const source = new K8sSource({ api: connection.api, fetch: connection.fetch });
          assert.deepEqual((await source.list()).map((c) => c.id), LISTED);
          // The kubelet rotates the projected token; it is read again after TOKEN_FILE_TTL_MS.
          await Deno.writeTextFile(`${account}/token`, "sa-token-2\n");
          clock.advance(TOKEN_FILE_TTL_MS);
          assert.deepEqual((await source.list()).map((c) => c.id), LISTED);
        } finally {
          connection.close();
        }
        assert.deepEqual(api.seen.map((s) => s.authorization), [
          "Bearer sa-token-1",
          "Bearer sa-token-2",
        ]);
      } finally {
        await api.close();
      }
    });
  },
);

Deno.test("MCP_K8S_API and MCP_K8S_TOKEN win over KUBECONFIG, and KUBECONFIG over the in-cluster account", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/config`,
      kubeconfig({
        current: "k",
        clusters: { k: { server: "https://kube.example:6443" } },
        users: { k: { token: "t" } },
        contexts: { k: { cluster: "k", user: "k" } },
      }),
    );
    const cluster = { KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBECONFIG: `${dir}/config` };
    const byEnv = await resolveConnection({
      env: { ...cluster, MCP_K8S_API: "http://127.0.0.1:9/", MCP_K8S_TOKEN: "x" },
      clock: systemClock,
    });
    byEnv.close();
    assert.deepEqual([byEnv.origin, byEnv.api], ["MCP_K8S_API", "http://127.0.0.1:9"]);
    const byFile = await resolveConnection({ env: cluster, clock: systemClock });
    byFile.close();
    assert.deepEqual([byFile.origin, byFile.api], [
      'kubeconfig context "k"',
      "https://kube.example:6443",
    ]);
    // ~/.kube/config is the kubeconfig when KUBECONFIG is unset.
    await Deno.mkdir(`${dir}/.kube`);
    await Deno.rename(`${dir}/config`, `${dir}/.kube/config`);
    const byHome = await resolveConnection({
      env: { KUBERNETES_SERVICE_HOST: "10.0.0.1", HOME: dir },
      clock: systemClock,
    });
    byHome.close();
    assert.equal(byHome.origin, 'kubeconfig context "k"');
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("kubeconfig settings that cannot be honoured are refused, naming the setting and the fix", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const refused = async (cluster: Record<string, unknown>, user: Record<string, unknown>) => {
      await Deno.writeTextFile(
        `${dir}/config`,
        kubeconfig({
          current: "x",
          clusters: { x: { server: "https://127.0.0.1:6443", ...cluster } },
          users: { x: user },
          contexts: { x: { cluster: "x", user: "x" } },
        }),
      );
      return resolveConnection({ env: { KUBECONFIG: `${dir}/config` }, clock: systemClock });
    };
    await assert.rejects(
      refused({ "insecure-skip-tls-verify": true }, { token: "t" }),
      /insecure-skip-tls-verify is not supported .*certificate-authority-data/,
    );
    await assert.rejects(
      refused({}, { "auth-provider": { name: "gcp" } }),
      /auth-provider "gcp" .*exec credential plugin/,
    );
    await assert.rejects(
      refused({}, { "client-certificate-data": b64("cert") }),
      /needs both the certificate and its key/,
    );
    await assert.rejects(
      refused({ "certificate-authority-data": "%%%" }, { token: "t" }),
      /cluster x has \*-data that is not base64/,
    );
    await assert.rejects(
      resolveConnection({ env: { KUBECONFIG: `${dir}/none:${dir}/neither` }, clock: systemClock }),
      /KUBECONFIG names .*none, .*neither, and none of them exists/,
    );
    await assert.rejects(
      resolveConnection({ env: { HOME: dir }, context: "dev", clock: systemClock }),
      /--context "dev" needs a kubeconfig/,
    );
    await assert.rejects(
      resolveConnection({
        env: { MCP_K8S_API: "https://127.0.0.1:6443" },
        context: "dev",
        clock: systemClock,
      }),
      /--context selects a kubeconfig context, but MCP_K8S_API is set/,
    );
    await Deno.writeTextFile(`${dir}/config`, "clusters: [{ name: x }]\n");
    await assert.rejects(
      resolveConnection({ env: { KUBECONFIG: `${dir}/config` }, clock: systemClock }),
      /kubeconfig .*config: clusters\.0\.cluster/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
