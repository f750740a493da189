#!/usr/bin/env bash
# What pip needs to build python-ldap (the LDAP login's library, which PyPI ships as
# source only): gcc and the OpenLDAP and SASL headers. `make install` runs this first.
# As root on Debian it installs what is missing; otherwise it names the packages.
set -euo pipefail
missing=()
command -v gcc >/dev/null || missing+=(gcc)
[ -f /usr/include/ldap.h ] || missing+=(libldap2-dev)
[ -f /usr/include/sasl/sasl.h ] || missing+=(libsasl2-dev)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "build-deps: installing ${missing[*]} (python-ldap builds against them)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
  exit 0
fi
echo "build-deps: python-ldap needs ${missing[*]}; install them (Debian/Ubuntu:" \
  "sudo apt-get install ${missing[*]}) and run make again" >&2
exit 1
