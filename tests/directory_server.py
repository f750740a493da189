"""The LDAP directory the sso tests run against (fixtures ldap_server, directory and
ldap_login; a test module or conftest imports them): LDAP_TEST_URI's (the one .ci/run
started with scripts/ldap/slapd.sh), or one these tests start on a free port and stop
at the end. Each test that changes the directory adds people and groups of its own
(`directory.person`, `directory.group`) and they are deleted after it, so the base
directory (alice, bob, carol, dana, erin; see scripts/ldap/slapd.sh) stays as loaded."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ldap" / "slapd.sh"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _exports(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export ") :].partition("=")
            found[name] = shlex.split(value)[0] if value else ""
    return found


@dataclass
class Directory:
    uri: str
    base: str
    bind_dn: str
    bind_password: str
    admin_dn: str
    admin_password: str
    password: str
    added: list[str] = field(default_factory=list)
    memberships: list[tuple[str, str]] = field(default_factory=list)

    @property
    def people(self) -> str:
        return f"ou=people,{self.base}"

    @property
    def groups(self) -> str:
        return f"ou=groups,{self.base}"

    def person_dn(self, uid: str) -> str:
        return f"uid={uid},{self.people}"

    def group_dn(self, name: str) -> str:
        return f"cn={name},{self.groups}"

    def modify(self, ldif: str, *, add: bool = False) -> None:
        command = ["ldapadd" if add else "ldapmodify", "-x", "-H", self.uri]
        command += ["-D", self.admin_dn, "-w", self.admin_password]
        answer = subprocess.run(command, input=ldif, capture_output=True, text=True, timeout=10)
        assert answer.returncode == 0, answer.stderr

    def delete(self, dn: str) -> None:
        subprocess.run(
            [
                "ldapdelete",
                "-x",
                "-H",
                self.uri,
                "-D",
                self.admin_dn,
                "-w",
                self.admin_password,
                dn,
            ],
            capture_output=True,
            timeout=10,
        )

    def person(self, prefix: str) -> str:
        """A new person (uid prefix-XXXX, password self.password); their uid."""
        uid = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.modify(
            f"dn: {self.person_dn(uid)}\nobjectClass: inetOrgPerson\nuid: {uid}\n"
            f"cn: {uid}\ngivenName: {prefix.title()}\nsn: Test\nmail: {uid}@gpuq.test\n"
            f"userPassword: {self.password}\n",
            add=True,
        )
        self.added.append(self.person_dn(uid))
        return uid

    def group(self, prefix: str, *members: str) -> str:
        """A new groupOfNames with these member DNs; its cn."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        lines = "".join(f"member: {member}\n" for member in members)
        self.modify(
            f"dn: {self.group_dn(name)}\nobjectClass: groupOfNames\ncn: {name}\n{lines}", add=True
        )
        self.added.append(self.group_dn(name))
        return name

    def join(self, group: str, member_dn: str) -> None:
        self.modify(
            f"dn: {self.group_dn(group)}\nchangetype: modify\nadd: member\nmember: {member_dn}\n"
        )
        self.memberships.append((group, member_dn))

    def leave(self, group: str, member_dn: str) -> None:
        self.modify(
            f"dn: {self.group_dn(group)}\nchangetype: modify\ndelete: member\nmember: {member_dn}\n"
        )

    def clean_up(self) -> None:
        for group, member in self.memberships:
            subprocess.run(
                [
                    "ldapmodify",
                    "-x",
                    "-H",
                    self.uri,
                    "-D",
                    self.admin_dn,
                    "-w",
                    self.admin_password,
                ],
                input=(
                    f"dn: {self.group_dn(group)}\nchangetype: modify\n"
                    f"delete: member\nmember: {member}\n"
                ),
                capture_output=True,
                text=True,
                timeout=10,
            )
        for dn in reversed(self.added):
            self.delete(dn)
        self.added.clear()
        self.memberships.clear()


@pytest.fixture(scope="session")
def ldap_server(tmp_path_factory):
    """The directory's coordinates (and, when these tests started it, its stop)."""
    started = None
    if os.environ.get("LDAP_TEST_URI"):
        env = dict(os.environ)
    else:
        directory = tmp_path_factory.mktemp("slapd")
        started = {
            **os.environ,
            "LDAP_TEST_DIR": str(directory),
            "LDAP_TEST_PORT": str(_free_port()),
        }
        answer = subprocess.run(
            [str(SCRIPT), "start"], env=started, capture_output=True, text=True, timeout=60
        )
        assert answer.returncode == 0, answer.stderr
        env = _exports(answer.stdout)
    try:
        yield {key: env[key] for key in env if key.startswith("LDAP_TEST_")}
    finally:
        if started is not None:
            subprocess.run([str(SCRIPT), "stop"], env=started, capture_output=True, timeout=60)


@pytest.fixture
def directory(ldap_server):
    found = Directory(
        uri=ldap_server["LDAP_TEST_URI"],
        base=ldap_server["LDAP_TEST_BASE"],
        bind_dn=ldap_server["LDAP_TEST_BIND_DN"],
        bind_password=ldap_server["LDAP_TEST_BIND_PASSWORD"],
        admin_dn=ldap_server["LDAP_TEST_ADMIN_DN"],
        admin_password=ldap_server["LDAP_TEST_ADMIN_PASSWORD"],
        password=ldap_server["LDAP_TEST_PASSWORD"],
    )
    yield found
    found.clean_up()


@pytest.fixture
def ldap_login(settings, directory):
    """The product configured for LDAP login against `directory`, as config/settings.py
    does from LDAP_* (config.ldap_settings)."""
    from config.ldap_settings import ldap_settings

    for name, value in ldap_settings(
        server_uri=directory.uri,
        bind_dn=directory.bind_dn,
        bind_password=directory.bind_password,
        user_search_base=directory.people,
        group_search_base=directory.groups,
    ).items():
        setattr(settings, name, value)
    settings.LDAP_SERVER_URI = directory.uri
    backends = list(settings.AUTHENTICATION_BACKENDS)
    backends.insert(1, "governance.directory.ldap.DirectoryLDAPBackend")
    settings.AUTHENTICATION_BACKENDS = backends
    return directory
