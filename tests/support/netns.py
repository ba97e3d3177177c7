"""Several "hosts" on this machine for multi-host tests: each host is a network namespace with
its own address (10.231.0.(10+i) on its eth0), its own hostname (h0, h1, ...: every command
runs in a UTS namespace of its own) and its own /etc/hosts naming all of them; the hosts'
eth0s are veth links to a bridge in a "switch" namespace, so nothing touches this machine's
own network. OpenMPI reaches a host through tests/support/netns_rsh.sh, which stands in for
ssh. The file system is shared: a directory written on one host is seen by all.

    with netns.Hosts(2, rate_mbit=1000) as hosts:
        p = hosts.popen(0, ["mpirun", "--hostfile", hosts.hostfile(slots=2), ...], env=hosts.mpi_env())
        hosts.tx_bytes(1)          # what h1's eth0 sent (its own counter)
        hosts.cut(1)               # h1's link down

Note [Namespaces as hosts]
- mpirun runs on h0 (as on a login node that is one of the hosts); mpirun decides which
  hostfile entries are "local" by hostname, so h0's ranks start directly and h1's through the
  agent. Ranks on one host talk through shared memory (vader) as on a real node: OpenMPI's
  session directory and shared-memory files carry the hostname, so two hosts never share them.
- OpenMPI picks interfaces by itself, and would try lo (every namespace has one, up, as a
  real host does): btl_tcp_if_include and oob_tcp_if_include name eth0.
- A cut link (eth0 down) drops packets silently, as a pulled cable: TCP retransmits for many
  minutes, so only trident's collective timeout ends the ranks. For mpirun and its daemons to
  notice the lost host as well, each host's TCP gives up sooner (net.ipv4.tcp_retries2 = 5,
  per namespace: unacknowledged data) and OpenMPI's out-of-band keepalives are short (idle
  connections); whatever is left in the namespaces is killed on exit (the processes the
  harness started).
- Needs root and iproute2 (ip, tc) and util-linux (unshare); `available()` says why not.
"""
import os
import shutil
import subprocess
import tempfile

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns_rsh.sh")
SUBNET = "10.231.0"


def available():
    """None when hosts can be made here, else why not (for the test's skip message)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            return f"needs '{tool}' (scripts/install-deps.sh installs iproute2 and util-linux)"
    probe = f"trprobe{os.getpid()}"
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if p.returncode != 0:
        return f"'ip netns add' failed: {p.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args, check=True):
    p = subprocess.run(["ip"] + list(args), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")
    return p


class Hosts:
    def __init__(self, n, rate_mbit=None, prefix=None):
        assert n >= 2
        self.n, self.rate_mbit = n, rate_mbit
        self.prefix = prefix or f"tr{os.getpid() % 100000}"
        self.names = [f"h{i}" for i in range(n)]
        self.switch = f"{self.prefix}sw"
        self.tmp = tempfile.mkdtemp(prefix="trident_hosts_")
        self.procs = []

    def ns(self, i):
        return f"{self.prefix}{self.names[i]}"

    def addr(self, i):
        return f"{SUBNET}.{10 + i}"

    def __enter__(self):
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _create(self):
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        hosts_file = "127.0.0.1 localhost\n" + "".join(f"{self.addr(i)} {h}\n" for i, h in enumerate(self.names))
        for i in range(self.n):
            ns = self.ns(i)
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            # Note [Namespaces as hosts]: TCP gives up on unacknowledged data after ~13 s, not 15 min.
            subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_retries2=5"], check=True)
            # The veth is made inside the switch namespace (names there are private), then one
            # end moves to the host and becomes its eth0.
            _ip("-n", self.switch, "link", "add", f"p{i}", "type", "veth", "peer", "name", f"e{i}")
            _ip("-n", self.switch, "link", "set", f"e{i}", "netns", ns)
            _ip("-n", ns, "link", "set", f"e{i}", "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0")
            _ip("-n", self.switch, "link", "set", f"p{i}", "up")
            if self.rate_mbit:
                self.limit(i, self.rate_mbit)
            etc = f"/etc/netns/{ns}"
            os.makedirs(etc, exist_ok=True)
            with open(f"{etc}/hosts", "w") as f:
                f.write(hosts_file)

    def limit(self, i, mbit):
        """A token-bucket limit on what host i sends (its eth0's egress): mbit Mbit/s."""
        burst = max(32 * 1024, int(mbit * 1e6 / 8 / 250))  # 4 ms worth (tbf needs >= rate / HZ)
        p = subprocess.run(["ip", "netns", "exec", self.ns(i), "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
                            "rate", f"{mbit}mbit", "burst", str(burst), "latency", "50ms"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"tc tbf on {self.names[i]}: {p.stderr.strip()}")

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for i in range(self.n):
            ns = self.ns(i)
            # What the agent started in the namespace (daemons that lost their host).
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", ns, check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
        _ip("netns", "del", self.switch, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def hostfile(self, slots, hosts=None):
        """A hostfile of the hosts (all by default) with `slots` ranks each."""
        path = os.path.join(self.tmp, f"hostfile_{slots}")
        with open(path, "w") as f:
            for h in hosts or self.names:
                f.write(f"{h} slots={slots}\n")
        return path

    def mpi_env(self, base=None):
        """The environment for mpirun (or trident launch) on h0: the agent, eth0 only,
        keepalives short enough that a daemon notices a lost host (Note [Namespaces as hosts])."""
        env = dict(base if base is not None else os.environ)
        env.update({
            "TRIDENT_NETNS_PREFIX": self.prefix,
            "TRIDENT_NETNS_DOWN": os.path.join(self.tmp, "down"),
            "OMPI_MCA_plm_rsh_agent": AGENT,
            "OMPI_MCA_btl": "self,vader,tcp",
            "OMPI_MCA_btl_tcp_if_include": "eth0",
            "OMPI_MCA_oob_tcp_if_include": "eth0",
            "OMPI_MCA_oob_tcp_keepalive_time": "5",
            "OMPI_MCA_oob_tcp_keepalive_intvl": "2",
            "OMPI_MCA_oob_tcp_keepalive_probes": "3",
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        })
        return env

    def command(self, i, argv):
        """argv as run on host i (its namespace and hostname), keeping the caller's environment."""
        return ["ip", "netns", "exec", self.ns(i), "unshare", "--uts", "sh", "-c", 'hostname "$0"; exec "$@"',
                self.names[i]] + list(argv)

    def popen(self, i, argv, **kw):
        p = subprocess.Popen(self.command(i, argv), **kw)
        self.procs.append(p)
        return p

    def run(self, i, argv, **kw):
        return subprocess.run(self.command(i, argv), **kw)

    def _stat(self, i, name):
        out = subprocess.run(["ip", "netns", "exec", self.ns(i), "cat", f"/sys/class/net/eth0/statistics/{name}"],
                             capture_output=True, text=True, check=True).stdout
        return int(out)

    def tx_bytes(self, i):
        """Bytes host i's eth0 has sent (the kernel's counter: frames with their headers)."""
        return self._stat(i, "tx_bytes")

    def rx_bytes(self, i):
        return self._stat(i, "rx_bytes")

    def down(self, i):
        """Host i gone: its agent answers as ssh does for a host that does not answer (255), and
        everything running on it is killed (its ranks and OpenMPI's daemon). up(i) undoes it."""
        os.makedirs(os.path.join(self.tmp, "down"), exist_ok=True)
        open(os.path.join(self.tmp, "down", self.names[i]), "w").close()
        for pid in _ip("netns", "pids", self.ns(i), check=False).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass

    def up(self, i):
        """Host i answers again (after down(i))."""
        try:
            os.remove(os.path.join(self.tmp, "down", self.names[i]))
        except FileNotFoundError:
            pass

    def cut(self, i):
        """Host i's link down, as a pulled cable."""
        _ip("-n", self.ns(i), "link", "set", "eth0", "down")
