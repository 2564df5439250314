package s3

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-fs/sluice/internal/errs"
)

// Where the gateway's access keys come from, first match wins:
//
//  1. CredentialOptions.AccessKey and SecretKey (flags --s3-access-key and
//     --s3-secret-key);
//  2. CredentialOptions.File (flag --s3-credentials FILE);
//  3. the environment: SLUICE_S3_ACCESS_KEY and SLUICE_S3_SECRET_KEY;
//  4. <DataDir>/s3-credentials, which the first `sluice serve` with the
//     gateway enabled generates (a random key pair, mode 0600) when there
//     is none.
//
// There is no built-in default credential.
//
// A credentials file holds one key pair per line, the access key and the
// secret key separated by white space; empty lines and lines starting with
// '#' are ignored:
//
//	# sluice S3 credentials
//	AKSLUICEEXAMPLE0001 wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
//
// The file must not be readable by group or others.

// Environment variables for the credentials.
const (
	EnvAccessKey = "SLUICE_S3_ACCESS_KEY"
	EnvSecretKey = "SLUICE_S3_SECRET_KEY"
)

// CredentialsFileName is the generated file's name in the data directory.
const CredentialsFileName = "s3-credentials"

// CredentialOptions say where to look for access keys.
type CredentialOptions struct {
	AccessKey, SecretKey string
	File                 string
	// DataDir, if set, is where a key pair is generated on first use
	// when no other source gives one. Empty: no generation (an error).
	DataDir string
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
}

// LoadCredentials returns the access keys and a description of where they
// came from (a file path, "flags" or "environment"). generated reports
// that a new key pair was written to the data directory.
func LoadCredentials(o CredentialOptions) (creds map[string]string, where string, generated bool, err error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	switch {
	case o.AccessKey != "" || o.SecretKey != "":
		if err := validKeyPair(o.AccessKey, o.SecretKey); err != nil {
			return nil, "", false, err
		}
		return map[string]string{o.AccessKey: o.SecretKey}, "flags", false, nil
	case o.File != "":
		creds, err := ReadCredentialsFile(o.File)
		return creds, o.File, false, err
	case getenv(EnvAccessKey) != "" || getenv(EnvSecretKey) != "":
		ak, sk := getenv(EnvAccessKey), getenv(EnvSecretKey)
		if err := validKeyPair(ak, sk); err != nil {
			return nil, "", false, fmt.Errorf("s3: $%s/$%s: %w", EnvAccessKey, EnvSecretKey, err)
		}
		return map[string]string{ak: sk}, "environment", false, nil
	case o.DataDir == "":
		return nil, "", false, errs.New(errs.Invalid, "s3: no credentials: give --s3-access-key and --s3-secret-key, --s3-credentials FILE, or $%s and $%s", EnvAccessKey, EnvSecretKey)
	}
	p := filepath.Join(o.DataDir, CredentialsFileName)
	creds, err = ReadCredentialsFile(p)
	if err == nil {
		return creds, p, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, "", false, err
	}
	ak, sk := generateKeyPair()
	content := "# Sluice S3 gateway credentials: access key, secret key (generated)\n" + ak + " " + sk + "\n"
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", false, fmt.Errorf("s3: create %s: %w", p, err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		os.Remove(p)
		return nil, "", false, fmt.Errorf("s3: write %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(p)
		return nil, "", false, fmt.Errorf("s3: write %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return nil, "", false, fmt.Errorf("s3: write %s: %w", p, err)
	}
	return map[string]string{ak: sk}, p, true, nil
}

// ReadCredentialsFile reads a credentials file (format above).
func ReadCredentialsFile(p string) (map[string]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("s3: read credentials: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("s3: read credentials: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, errs.New(errs.Permission, "s3: credentials file %s is readable by others (mode %v): chmod 600 it", p, fi.Mode().Perm())
	}
	creds := make(map[string]string)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		fields := strings.Fields(l)
		if len(fields) != 2 {
			return nil, errs.New(errs.Invalid, "s3: %s:%d: want ACCESS_KEY SECRET_KEY", p, line)
		}
		if err := validKeyPair(fields[0], fields[1]); err != nil {
			return nil, fmt.Errorf("s3: %s:%d: %w", p, line, err)
		}
		if _, dup := creds[fields[0]]; dup {
			return nil, errs.New(errs.Invalid, "s3: %s:%d: access key %s given twice", p, line, fields[0])
		}
		creds[fields[0]] = fields[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("s3: read %s: %w", p, err)
	}
	if len(creds) == 0 {
		return nil, errs.New(errs.Invalid, "s3: %s has no key pairs", p)
	}
	return creds, nil
}

// validKeyPair checks an access key (3-128 characters without white
// space, '/' or '=', which would break the Credential field) and a secret
// (at least 8 characters without white space).
func validKeyPair(ak, sk string) error {
	switch {
	case len(ak) < 3 || len(ak) > 128:
		return errs.New(errs.Invalid, "s3: an access key must have 3 to 128 characters")
	case strings.ContainsAny(ak, " \t\r\n/=,"):
		return errs.New(errs.Invalid, "s3: an access key cannot contain white space, '/', '=' or ','")
	case len(sk) < 8:
		return errs.New(errs.Invalid, "s3: a secret key must have at least 8 characters")
	case strings.ContainsAny(sk, " \t\r\n"):
		return errs.New(errs.Invalid, "s3: a secret key cannot contain white space")
	}
	return nil
}

// generateKeyPair returns a random access key (20 upper-case letters and
// digits, like AWS's) and secret key (40 letters and digits).
func generateKeyPair() (string, string) {
	const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	const mixed = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	pick := func(alphabet string, n int) string {
		b := make([]byte, n)
		var r [1]byte
		for i := 0; i < n; {
			if _, err := randReader.Read(r[:]); err != nil {
				panic("s3: no randomness: " + err.Error())
			}
			// Rejection sampling keeps the choice uniform.
			if int(r[0]) >= 256-256%len(alphabet) {
				continue
			}
			b[i] = alphabet[int(r[0])%len(alphabet)]
			i++
		}
		return string(b)
	}
	return "SLK" + pick(upper, 17), pick(mixed, 40)
}
