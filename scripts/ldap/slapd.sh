#!/usr/bin/env bash
# An OpenLDAP test directory on this host, without systemd or debconf: one slapd on
# loopback, its configuration (cn=config) and data loaded by slapadd from LDIF this
# script writes. Run as root (or as any user: slapd then runs as that user).
#
#   scripts/ldap/slapd.sh start    # idempotent; waits until slapd answers and prints the
#                                  # `export LDAP_TEST_...=` lines the tests (marker sso) use
#   scripts/ldap/slapd.sh status   # whether it runs, and the same exports
#   scripts/ldap/slapd.sh stop     # stops exactly the slapd it started (pid file)
#
# Everything (cn=config, the mdb database, the pid file, the LDIF) lives under
# LDAP_TEST_DIR (default /tmp/gpuq-ldap); slapd listens on 127.0.0.1:LDAP_TEST_PORT
# (default 13389). A start when it is not running loads the directory afresh, so a
# test's ldapmodify never outlives the server it ran on.
#
# The directory, under dc=gpuq,dc=test (people's password: LDAP_TEST_PASSWORD):
#   ou=people: alice, bob, carol, dana, erin (inetOrgPerson, uid=NAME)
#   ou=groups (groupOfNames):
#     vision-leads     alice
#     team-leads       the group vision-leads      (a nested group: alice through it)
#     vision           the group vision-leads, bob (nested too)
#     exception-owners carol
#     platform-admins  dana
#   cn=reader,ou=services: the account the product binds as to search (reads all but
#   passwords); erin is in no group.
# TLS: StartTLS with a certificate for 127.0.0.1 signed by a CA made at each start
# (openssl; LDAP_TEST_CA_CERT names it).
#
# Needs Debian's slapd and ldap-utils (apt-get install --no-install-recommends slapd
# ldap-utils; the package's own /etc/ldap/slapd.d is neither used nor touched).
set -euo pipefail

DIR="${LDAP_TEST_DIR:-/tmp/gpuq-ldap}"
PORT="${LDAP_TEST_PORT:-13389}"
URI="ldap://127.0.0.1:$PORT"
SUFFIX="dc=gpuq,dc=test"
ROOT_DN="cn=admin,$SUFFIX"
READER_DN="cn=reader,ou=services,$SUFFIX"
SECRET="${LDAP_TEST_ADMIN_PASSWORD:-gpuq-ldap-admin}"
READER_PASSWORD="${LDAP_TEST_READER_PASSWORD:-gpuq-ldap-reader}"
PASSWORD="${LDAP_TEST_PASSWORD:-gpuq-ldap-user}"
PIDFILE="$DIR/run/slapd.pid"
SCHEMA=/etc/ldap/schema
MODULES=/usr/lib/ldap

say() { printf 'slapd: %s\n' "$*" >&2; }

alive() { [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

exports() {
  echo "export LDAP_TEST_URI=$URI"
  [ -s "$DIR/tls/ca.pem" ] && echo "export LDAP_TEST_CA_CERT=$DIR/tls/ca.pem"
  echo "export LDAP_TEST_BASE=$SUFFIX"
  echo "export LDAP_TEST_BIND_DN=$READER_DN"
  echo "export LDAP_TEST_BIND_PASSWORD=$READER_PASSWORD"
  echo "export LDAP_TEST_ADMIN_DN=$ROOT_DN"
  echo "export LDAP_TEST_ADMIN_PASSWORD=$SECRET"
  echo "export LDAP_TEST_PASSWORD=$PASSWORD"
}

# A CA of its own and the server's certificate it signs (for 127.0.0.1 and localhost),
# made afresh at each start with openssl: StartTLS on $URI, checked against
# $DIR/tls/ca.pem (exported as LDAP_TEST_CA_CERT). Without openssl: no TLS.
write_tls() {
  command -v openssl >/dev/null || return 0
  local tls="$DIR/tls"
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=gpuq test LDAP CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$tls/ext.cnf"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 2 -extfile "$tls/ext.cnf" -out "$tls/server.pem" 2>/dev/null
  chmod 600 "$tls/server.key" "$tls/ca.key"
}

tls_config() { # the end of cn=config: its TLS certificates (when made), its log level
  if [ -s "$DIR/tls/server.pem" ]; then
    echo "olcTLSCACertificateFile: $DIR/tls/ca.pem"
    echo "olcTLSCertificateFile: $DIR/tls/server.pem"
    echo "olcTLSCertificateKeyFile: $DIR/tls/server.key"
  fi
  echo "olcLogLevel: none"
}

write_config() {
  local hashed
  hashed="$(slappasswd -s "$SECRET")"
  cat >"$DIR/config.ldif" <<EOF
dn: cn=config
objectClass: olcGlobal
cn: config
olcPidFile: $PIDFILE
olcArgsFile: $DIR/run/slapd.args
$(tls_config)

dn: cn=module{0},cn=config
objectClass: olcModuleList
cn: module{0}
olcModulePath: $MODULES
olcModuleLoad: back_mdb

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

include: file://$SCHEMA/core.ldif

include: file://$SCHEMA/cosine.ldif

include: file://$SCHEMA/nis.ldif

include: file://$SCHEMA/inetorgperson.ldif

dn: olcDatabase={-1}frontend,cn=config
objectClass: olcDatabaseConfig
objectClass: olcFrontendConfig
olcDatabase: {-1}frontend
olcSizeLimit: 500

dn: olcDatabase={0}config,cn=config
objectClass: olcDatabaseConfig
olcDatabase: {0}config
olcAccess: {0}to * by * none

dn: olcDatabase={1}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {1}mdb
olcSuffix: $SUFFIX
olcRootDN: $ROOT_DN
olcRootPW: $hashed
olcDbDirectory: $DIR/data
olcDbMaxSize: 67108864
olcDbIndex: objectClass eq
olcDbIndex: uid eq
olcDbIndex: member eq
olcAccess: {0}to attrs=userPassword by self write by anonymous auth by * none
olcAccess: {1}to * by dn.exact="$READER_DN" read by self read by * none
EOF
}

person() { # person UID GIVEN SURNAME
  cat <<EOF
dn: uid=$1,ou=people,$SUFFIX
objectClass: inetOrgPerson
uid: $1
cn: $2 $3
givenName: $2
sn: $3
mail: $1@gpuq.test
userPassword: $PASSWORD

EOF
}

group() { # group NAME MEMBER_DN...
  local name="$1"
  shift
  echo "dn: cn=$name,ou=groups,$SUFFIX"
  echo "objectClass: groupOfNames"
  echo "cn: $name"
  for member in "$@"; do echo "member: $member"; done
  echo
}

write_data() {
  local people="ou=people,$SUFFIX" groups="ou=groups,$SUFFIX"
  {
    printf 'dn: %s\nobjectClass: dcObject\nobjectClass: organization\ndc: gpuq\no: gpuq test directory\n\n' "$SUFFIX"
    for ou in people groups services; do
      printf 'dn: ou=%s,%s\nobjectClass: organizationalUnit\nou: %s\n\n' "$ou" "$SUFFIX" "$ou"
    done
    printf 'dn: %s\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: reader\nuserPassword: %s\n\n' \
      "$READER_DN" "$READER_PASSWORD"
    person alice Alice Lead
    person bob Bob Member
    person carol Carol Owner
    person dana Dana Admin
    person erin Erin Nogroup
    group vision-leads "uid=alice,$people"
    group team-leads "cn=vision-leads,$groups"
    group vision "cn=vision-leads,$groups" "uid=bob,$people"
    group exception-owners "uid=carol,$people"
    group platform-admins "uid=dana,$people"
  } >"$DIR/data.ldif"
}

start() {
  if alive; then
    say "already running (pid $(cat "$PIDFILE")) on $URI"
    exports
    return
  fi
  for program in slapd slapadd slappasswd ldapwhoami; do
    command -v "$program" >/dev/null || PATH="$PATH:/usr/sbin"
    command -v "$program" >/dev/null || {
      say "$program not found: apt-get install --no-install-recommends slapd ldap-utils"
      exit 1
    }
  done
  local started=$SECONDS
  rm -rf "$DIR/slapd.d" "$DIR/data" "$DIR/tls"
  mkdir -p "$DIR"/{slapd.d,data,run}
  write_tls
  write_config
  write_data
  slapadd -n 0 -F "$DIR/slapd.d" -l "$DIR/config.ldif" >/dev/null
  slapadd -n 1 -F "$DIR/slapd.d" -l "$DIR/data.ldif" -q >/dev/null
  slapd -h "$URI/" -F "$DIR/slapd.d"
  for _ in $(seq 1 100); do
    if ldapwhoami -x -H "$URI" -D "$READER_DN" -w "$READER_PASSWORD" >/dev/null 2>&1; then
      say "ready in $((SECONDS - started)) s on $URI (pid $(cat "$PIDFILE")), directory $SUFFIX"
      exports
      return
    fi
    sleep 0.1
  done
  say "slapd does not answer on $URI (start it in the foreground to see why:"
  say "  slapd -d 256 -h $URI/ -F $DIR/slapd.d)"
  exit 1
}

stop() {
  if alive; then
    local pid
    pid="$(cat "$PIDFILE")"
    kill "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    say "stopped slapd (pid $pid)"
  fi
  rm -f "$PIDFILE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if alive; then echo "slapd: running (pid $(cat "$PIDFILE")) on $URI"; exports; else echo "slapd: stopped"; fi
    ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
