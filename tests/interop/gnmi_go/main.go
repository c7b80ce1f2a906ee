// A gNMI server built with grpc-go, for the interop test of fabricmon's own HTTP/2 client
// (tests/integration/test_grpc_h2_interop.py).
//
// It serves gnmi.gNMI/Subscribe with a codec that passes []byte through, so no generated
// protobuf code is needed: the service is registered by hand (grpc.ServiceDesc). On each call it
// reads one SubscribeRequest and streams the recorded SubscribeResponses of -responses (a file of
// messages, each a 4-byte big-endian length and the bytes), -repeat times over, then ends with OK.
// It prints "port N" on stdout once listening. With -cert and -key it serves TLS.
//
// Built offline from Debian's packages (golang-go, golang-google-grpc-dev), GOPATH mode:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o gnmi_go .
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// rawCodec hands gRPC's message bytes through untouched (the "proto" content-subtype, as a
// gNMI client sends).
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) String() string { return "proto" }

type gnmiServer interface{}

type server struct {
	responses [][]byte
	repeat    int
}

func subscribe(srv interface{}, stream grpc.ServerStream) error {
	s := srv.(*server)
	var request []byte
	if err := stream.RecvMsg(&request); err != nil {
		return err
	}
	if md, ok := metadata.FromIncomingContext(stream.Context()); ok && len(md.Get("username")) > 0 {
		// the client's metadata arrives: echoed in the response headers
		if err := stream.SendHeader(metadata.Pairs("seen-username", md.Get("username")[0])); err != nil {
			return err
		}
	}
	for i := 0; i < s.repeat; i++ {
		for _, r := range s.responses {
			msg := r
			if err := stream.SendMsg(&msg); err != nil {
				return err
			}
		}
	}
	return nil
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: "gnmi.gNMI",
	HandlerType: (*gnmiServer)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Subscribe", Handler: subscribe, ServerStreams: true, ClientStreams: true},
	},
	Metadata: "gnmi.proto",
}

func readResponses(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var out [][]byte
	for {
		var n uint32
		if err := binary.Read(r, binary.BigEndian, &n); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
}

func main() {
	responses := flag.String("responses", "", "recorded SubscribeResponses (4-byte length, bytes; repeated)")
	repeat := flag.Int("repeat", 1, "how many times to stream the recording per call")
	cert := flag.String("cert", "", "TLS certificate (PEM); with -key, serve TLS")
	key := flag.String("key", "", "TLS private key (PEM)")
	flag.Parse()
	recorded, err := readResponses(*responses)
	if err != nil {
		log.Fatalf("responses: %v", err)
	}
	opts := []grpc.ServerOption{grpc.CustomCodec(rawCodec{})}
	if *cert != "" {
		creds, err := credentials.NewServerTLSFromFile(*cert, *key)
		if err != nil {
			log.Fatalf("tls: %v", err)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	s := grpc.NewServer(opts...)
	s.RegisterService(&serviceDesc, &server{responses: recorded, repeat: *repeat})
	fmt.Printf("port %d\n", lis.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	if err := s.Serve(lis); err != nil {
		log.Fatalf("serve: %v", err)
	}
}
