package main

import (
	"fmt"
	"net"

	"github.com/office-server/office-server/server"
)

// consoleURL returns a console base URL a browser can open for a server
// listening on addr: an unspecified address (0.0.0.0, [::]) is not one, so
// 127.0.0.1 stands in for it (Go's wildcard "tcp" listener is dual-stack:
// --addr 0.0.0.0:8080 listens on [::]:8080 and takes IPv4 too).
func consoleURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// exposure returns the warning for a server listening beyond this machine
// on addr, or "" for a loopback address.
func exposure(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() || host == "localhost" {
		return ""
	}
	where := "on " + host
	if ip != nil && ip.IsUnspecified() {
		where = "on all interfaces"
		for _, a := range server.InterfaceAddrs() {
			if a := net.ParseIP(a); a != nil && !a.IsLoopback() {
				where += " (e.g. http://" + net.JoinHostPort(a.String(), port) + "/)"
				break
			}
		}
	}
	return fmt.Sprintf("listening %s, beyond this machine: whoever reaches port %s can try the admin token, and the token runs any command as this user (a command agent); the server speaks plain HTTP, so the token crosses the network in clear unless a TLS proxy is in front (then give its origin with --allowed-origins https://…). Bind to 127.0.0.1 unless that is what you want", where, port)
}
