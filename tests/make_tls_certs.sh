#!/bin/sh
# Makes the certificates of the --rdzv-tls tests in DIR with the openssl
# command, at test time (nothing secret is ever committed): a job CA and a
# server and a client certificate it signs, and a second CA ("other") with a
# client certificate of its own, which the job's CA must refuse. EC P-256
# keys, mode 0600, valid for two days. No host names: drun checks the chain
# to the CA, not names (docs/architecture.md, "TLS").
#   DIR/ca.pem  server.pem server.key  client.pem client.key
#   DIR/other-ca.pem  other.pem other.key
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
ca() {  # NAME
  key "$1"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=drun test $1" 2>/dev/null
}
leaf() {  # NAME CA
  key "$1"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=drun test $1" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -out "$1.pem" -days 2 2>/dev/null
  rm -f "$1.csr"
}
ca ca
leaf server ca
leaf client ca
ca other-ca
leaf other other-ca
chmod 644 ./*.pem
