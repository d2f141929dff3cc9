#!/usr/bin/env bash
# Makes a CA (ca.pem) and a server certificate for localhost and 127.0.0.1 (server.pem,
# key server.key, mode 600) in DIR with the openssl CLI, as a public CA would issue it:
# ECDSA P-256 (what Mozilla's intermediate profile recommends), 90 days, serverAuth, a CRL
# distribution point. For the TLS checks and benchmarks, never for production.
# Usage: .ci/certificate.sh DIR
set -euo pipefail
cd "$1"
key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${key[@]}" -keyout ca.key -out ca.pem -days 30 -subj "/CN=Catalog Test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req "${key[@]}" -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
cat > leaf.cnf <<'CNF'
subjectAltName=DNS:localhost,IP:127.0.0.1
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
crlDistributionPoints=URI:http://ca.invalid/catalog-test.crl
CNF
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 90 -extfile leaf.cnf -out server.pem 2>/dev/null
chmod 600 server.key ca.key
