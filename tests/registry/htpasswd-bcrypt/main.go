// htpasswd-bcrypt reads a password on stdin and prints one htpasswd line, "USER:BCRYPT-HASH", as
// the registry's htpasswd auth reads it (it accepts bcrypt hashes only). It replaces Apache's
// htpasswd tool, which a fresh machine lacks; `build` compiles it with the registry's own
// golang.org/x/crypto, so it needs nothing else.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" || strings.ContainsAny(os.Args[1], ":\r\n") {
		fmt.Fprintln(os.Stderr, "usage: htpasswd-bcrypt USER <password  (USER without ':' or newlines)")
		os.Exit(2)
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "htpasswd-bcrypt: reading the password:", err)
		os.Exit(1)
	}
	password := strings.TrimRight(string(in), "\r\n")
	if password == "" {
		fmt.Fprintln(os.Stderr, "htpasswd-bcrypt: empty password on stdin")
		os.Exit(2)
	}
	// The registry checks the hash on every request; the minimum cost keeps that at about a
	// millisecond, which a loopback test registry with a random password can afford.
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		fmt.Fprintln(os.Stderr, "htpasswd-bcrypt:", err)
		os.Exit(1)
	}
	fmt.Printf("%s:%s\n", os.Args[1], hash)
}
