# Certificates and kubeconfigs for the local control plane. Sourced by `up`.
# ECDSA P-256 keys: as good as RSA here and generated in milliseconds.

new_key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; }

make_ca() {
  local dir=$1
  new_key "$dir/ca.key"
  openssl req -x509 -new -key "$dir/ca.key" -out "$dir/ca.crt" -days 3650 -subj "/CN=orca-local-cluster-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
}

# sign_cert DIR NAME SUBJECT EXT_KEY_USAGE [SUBJECT_ALT_NAMES]
sign_cert() {
  local dir=$1 name=$2 subject=$3 eku=$4 sans=${5:-}
  new_key "$dir/$name.key"
  local ext="$dir/$name.ext"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -n "$sans" ]] && echo "subjectAltName=$sans"
  } >"$ext"
  openssl req -new -key "$dir/$name.key" -subj "$subject" 2>/dev/null |
    openssl x509 -req -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 365 \
      -extfile "$ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$ext"
}

# write_kubeconfig FILE SERVER CA CERT KEY USER
write_kubeconfig() {
  local file=$1 server=$2 ca=$3 cert=$4 key=$5 user=$6
  cat >"$file" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: orca-local
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$ca")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$cert")
    client-key-data: $(base64 -w0 <"$key")
contexts:
- name: orca-local
  context: {cluster: orca-local, user: $user}
current-context: orca-local
KUBECONFIG
  chmod 600 "$file"
}

make_pki() {
  local pki=$1
  mkdir -p "$pki"
  make_ca "$pki"
  sign_cert "$pki" apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign_cert "$pki" admin "/O=system:masters/CN=orca-local-admin" clientAuth
  sign_cert "$pki" controller-manager "/CN=system:kube-controller-manager" clientAuth
  sign_cert "$pki" scheduler "/CN=system:kube-scheduler" clientAuth
  # orca's own identity, so the audit log tells its requests apart (benchmarks count them).
  sign_cert "$pki" orca "/O=system:masters/CN=orca" clientAuth
  # The peers the side-by-side benchmark runs (KWOK, virtual-kubelet's mock), each its own
  # identity for the same reason.
  sign_cert "$pki" kwok "/O=system:masters/CN=kwok" clientAuth
  sign_cert "$pki" virtual-kubelet "/O=system:masters/CN=virtual-kubelet" clientAuth
  # The apiserver presents this to kubelets (orca's kubelet API) for logs, exec and proxy.
  sign_cert "$pki" apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  # The aggregation layer: the apiserver proxies metrics.k8s.io (metrics-server) with this client
  # certificate, of a CA of its own, as kubeadm sets it up.
  mkdir -p "$pki/front-proxy"
  make_ca "$pki/front-proxy"
  sign_cert "$pki/front-proxy" client "/CN=front-proxy-client" clientAuth
  chmod 600 "$pki"/front-proxy/*.key
  # Service-account token signing key pair.
  new_key "$pki/sa.key"
  openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  chmod 600 "$pki"/*.key
}
