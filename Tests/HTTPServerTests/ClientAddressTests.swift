import XCTest

@testable import HTTPServer

/// Addresses, networks, the forwarding fields of trusted proxies and PROXY protocol v2 headers.
final class ClientAddressTests: XCTestCase {
    // MARK: Addresses

    func testParsesIPv4() throws {
        XCTAssertEqual(try address("192.0.2.1").bytes, [192, 0, 2, 1])
        XCTAssertEqual(try address("0.0.0.0").bytes, [0, 0, 0, 0])
        XCTAssertEqual(try address("255.255.255.255").bytes, [255, 255, 255, 255])
        XCTAssertEqual(try address("10.0.0.10").description, "10.0.0.10")
    }

    func testRefusesMalformedIPv4() {
        for text in [
            "01.2.3.4", "1.2.3.04", "1.2.3.00", "256.1.1.1", "1.2.3.999", "1234.1.1.1", "1.2.3", "1.2.3.4.5",
            "1..2.3", "1.2.3.", ".1.2.3", "", " 1.2.3.4", "1.2.3.4 ", "1.2.3.-4", "+1.2.3.4", "a.b.c.d",
            "1.2.3.4/8", "1.2.3.4:80", "１.2.3.4",
        ] {
            XCTAssertNil(IPAddress(text), text)
        }
    }

    func testParsesIPv6() throws {
        XCTAssertEqual(try address("::").bytes, [UInt8](repeating: 0, count: 16))
        XCTAssertEqual(try address("::1").bytes, [UInt8](repeating: 0, count: 15) + [1])
        XCTAssertEqual(try address("2001:db8::1").bytes, [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1])
        XCTAssertEqual(try address("2001:DB8:0:0:0:0:0:1"), try address("2001:0db8::0001"))
        XCTAssertEqual(try address("1:2:3:4:5:6:7::").bytes.suffix(4), [0, 7, 0, 0])
        XCTAssertEqual(try address("::2:3:4:5:6:7:8").bytes.prefix(4), [0, 0, 0, 2])
        XCTAssertEqual(
            try address("1:2:3:4:5:6:7:8").bytes,
            [0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8])
        XCTAssertEqual(
            try address("64:ff9b::192.0.2.33").bytes,
            [0, 0x64, 0xFF, 0x9B] + [UInt8](repeating: 0, count: 8) + [192, 0, 2, 33])
        XCTAssertEqual(try address("1:2:3:4:5:6:1.2.3.4").bytes.suffix(6), [0, 6, 1, 2, 3, 4])
        XCTAssertEqual(try address("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255").bytes, [UInt8](repeating: 0xFF, count: 16))
    }

    func testRefusesMalformedIPv6() {
        for text in [
            "::1::", ":::", "1:::2", "1::2::3", ":1::", "1::2:", ":1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:",
            "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8::", "::1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7",
            "fe80::1%eth0", "fe80::1%1", "12345::", "g::", "::-1", "[::1]", "[::1]:80", " ::1", "::1 ",
            "::1.2.3", "::01.2.3.4", "::256.2.3.4", "::1.2.3.4:5", "1.2.3.4::", "::1.2.3.4.5",
            "1:2:3:4:5:6:7:1.2.3.4", "1:2:3:4:5:6:7:8:1.2.3.4", "0000:0000:0000:0000:0000:0000:0000:00001",
        ] {
            XCTAssertNil(IPAddress(text), text)
        }
    }

    func testMappedAddressesAreIPv4() throws {
        let v4 = try address("192.0.2.1")
        XCTAssertEqual(try address("::ffff:192.0.2.1"), v4)
        XCTAssertEqual(try address("::FFFF:c000:201"), v4)
        XCTAssertEqual(try address("0:0:0:0:0:ffff:192.0.2.1").bytes, [192, 0, 2, 1])
        XCTAssertEqual(try address("::ffff:192.0.2.1").description, "192.0.2.1")
        XCTAssertEqual(IPAddress(bytes: IPAddress.mappedPrefix + [192, 0, 2, 1]), v4)
        // Only ::ffff:0:0/96 is IPv4; the deprecated IPv4-compatible form stays IPv6.
        XCTAssertEqual(try address("::192.0.2.1").bytes.count, 16)
        XCTAssertEqual(try address("::fffe:192.0.2.1").bytes.count, 16)
    }

    func testAddressFromBytes() {
        XCTAssertEqual(IPAddress(bytes: [1, 2, 3, 4])?.description, "1.2.3.4")
        XCTAssertEqual(IPAddress(bytes: [UInt8](repeating: 0, count: 15) + [1])?.description, "::1")
        XCTAssertNil(IPAddress(bytes: [1, 2, 3]))
        XCTAssertNil(IPAddress(bytes: [UInt8](repeating: 0, count: 6)))
        XCTAssertNil(IPAddress(bytes: []))
    }

    func testClientKeyKeepsTheExistingFormat() throws {
        XCTAssertEqual(try address("192.0.2.1").clientKey, "192.0.2.1")
        XCTAssertEqual(try address("::ffff:10.1.2.3").clientKey, "10.1.2.3")
        XCTAssertEqual(try address("2001:db8:1:2:3:4:5:6").clientKey, "20:1:d:b8:0:1:0:2::/64")
        XCTAssertEqual(try address("2001:db8:1:2:ffff::1").clientKey, "20:1:d:b8:0:1:0:2::/64")
        XCTAssertEqual(try address("::1").clientKey, "0:0:0:0:0:0:0:0::/64")
    }

    func testDescriptionIsCanonical() throws {
        let cases = [
            "2001:0db8:0000:0000:0000:0000:0000:0001": "2001:db8::1",
            "2001:db8:0:0:1:0:0:1": "2001:db8::1:0:0:1",
            "1:0:0:2:0:0:0:3": "1:0:0:2::3",
            "1:0:2:3:4:5:6:7": "1:0:2:3:4:5:6:7",
            "FE80::ABCD": "fe80::abcd",
            "::": "::",
            "::1": "::1",
            "1::": "1::",
            "64:ff9b::192.0.2.33": "64:ff9b::c000:221",
        ]
        for (text, expected) in cases {
            XCTAssertEqual(try address(text).description, expected, text)
        }
    }

    // MARK: Networks

    func testNetworkMatching() throws {
        let ten = try network("10.0.0.0/8")
        XCTAssertTrue(ten.contains(try address("10.0.0.0")))
        XCTAssertTrue(ten.contains(try address("10.255.1.2")))
        XCTAssertTrue(ten.contains(try address("::ffff:10.0.0.1")))
        XCTAssertFalse(ten.contains(try address("11.0.0.1")))
        XCTAssertFalse(ten.contains(try address("9.255.255.255")))
        XCTAssertFalse(ten.contains(try address("::a00:1")))

        let pair = try network("192.0.2.0/31")
        XCTAssertTrue(pair.contains(try address("192.0.2.1")))
        XCTAssertFalse(pair.contains(try address("192.0.2.2")))

        let v6 = try network("2001:db8::/33")
        XCTAssertTrue(v6.contains(try address("2001:db8:7fff:ffff::1")))
        XCTAssertFalse(v6.contains(try address("2001:db8:8000::")))
        XCTAssertFalse(v6.contains(try address("192.0.2.1")))
    }

    func testWholeAndSingleAddressNetworks() throws {
        let allV4 = try network("0.0.0.0/0")
        XCTAssertTrue(allV4.contains(try address("1.2.3.4")))
        XCTAssertTrue(allV4.contains(try address("255.255.255.255")))
        XCTAssertFalse(allV4.contains(try address("::1")))

        let allV6 = try network("::/0")
        XCTAssertTrue(allV6.contains(try address("2001:db8::1")))
        XCTAssertTrue(allV6.contains(try address("1.2.3.4")))  // as ::ffff:1.2.3.4

        let loopback = try network("::1/128")
        XCTAssertTrue(loopback.contains(try address("::1")))
        XCTAssertFalse(loopback.contains(try address("::2")))
        XCTAssertFalse(loopback.contains(try address("::")))
        XCTAssertEqual(try network("::1"), loopback)

        let host = try network("192.0.2.1")
        XCTAssertEqual(host, try network("192.0.2.1/32"))
        XCTAssertTrue(host.contains(try address("192.0.2.1")))
        XCTAssertFalse(host.contains(try address("192.0.2.0")))
        XCTAssertEqual(host.prefixLength, 32)
        XCTAssertEqual(try network("2001:db8::1").prefixLength, 128)
    }

    func testNetworkHostBitsAreMasked() throws {
        XCTAssertEqual(try network("10.1.2.3/8"), try network("10.0.0.0/8"))
        XCTAssertEqual(try network("10.1.2.3/8").bytes, [10, 0, 0, 0])
        XCTAssertTrue(try network("10.1.2.3/8").contains(try address("10.9.9.9")))
        XCTAssertEqual(try network("192.0.2.255/25").bytes, [192, 0, 2, 128])
        let fd = try network("fd12:3456::1/8")
        XCTAssertTrue(fd.contains(try address("fdff::1")))
        XCTAssertFalse(fd.contains(try address("fe00::1")))
        XCTAssertEqual(fd, try network("fd00::/8"))
    }

    func testMappedNetworkIsIPv4() throws {
        XCTAssertEqual(try network("::ffff:10.0.0.0/104"), try network("10.0.0.0/8"))
        XCTAssertEqual(try network("::ffff:192.0.2.1"), try network("192.0.2.1/32"))
        XCTAssertTrue(try network("::ffff:0:0/96").contains(try address("203.0.113.1")))
    }

    func testRefusesMalformedNetworks() {
        for text in [
            "10.0.0.0/33", "::/129", "10.0.0.0/", "/8", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/8/8",
            "10.0.0.0/ 8", "10.0.0.0 /8", "10.0.0/8", "10.0.0.0/08", "10.0.0.0/0008", "fe80::/10%eth0",
            "fe80::%eth0/10", "[::1]/128", "", "any",
        ] {
            XCTAssertNil(IPNetwork(text), text)
        }
    }

    func testTrustedProxyList() throws {
        let proxies = try TrustedProxies.parse(" 10.0.0.0/8 ,::1,\tfd00::/8 ").get()
        XCTAssertEqual(proxies.networks, [try network("10.0.0.0/8"), try network("::1/128"), try network("fd00::/8")])
        XCTAssertEqual(try TrustedProxies.parse("192.0.2.7").get().networks, [try network("192.0.2.7/32")])
        XCTAssertEqual(TrustedProxies([]).networks, [])
    }

    func testTrustedProxyListErrorsNameTheItem() {
        XCTAssertEqual(parseError("10.0.0.0/8, bogus , ::1"), TrustedProxies.ParseError(item: "bogus"))
        XCTAssertEqual(parseError("10.0.0.0/8,10.0.0.0/33"), TrustedProxies.ParseError(item: "10.0.0.0/33"))
        XCTAssertEqual(parseError("10.0.0.0/8,,::1"), TrustedProxies.ParseError(item: ""))
        XCTAssertEqual(parseError("10.0.0.0/8,"), TrustedProxies.ParseError(item: ""))
        XCTAssertEqual(parseError(" "), TrustedProxies.ParseError(item: ""))
        XCTAssertEqual(parseError(""), TrustedProxies.ParseError(item: ""))
        XCTAssertEqual(parseError("1.2.3.4 5.6.7.8"), TrustedProxies.ParseError(item: "1.2.3.4 5.6.7.8"))
        XCTAssertEqual(parseError("a, bogus")?.description, "\"a\" is not an IP address or network.")
        XCTAssertEqual(parseError(",")?.description, "The trusted proxy list has an empty item.")
    }

    // MARK: Forwarded and X-Forwarded-For

    private let proxies = TrustedProxies([IPNetwork("10.0.0.0/8"), IPNetwork("2001:db8:ffff::/48")].compactMap { $0 })

    func testUntrustedPeersFieldsAreIgnored() throws {
        let peer = try address("203.0.113.9")
        XCTAssertNil(proxies.forwardedClient(peer: peer, forwarded: [], xForwardedFor: ["198.51.100.1"]))
        XCTAssertNil(proxies.forwardedClient(peer: peer, forwarded: ["for=198.51.100.1"], xForwardedFor: []))
        XCTAssertNil(TrustedProxies([]).forwardedClient(peer: try address("10.0.0.1"), forwarded: [], xForwardedFor: ["198.51.100.1"]))
    }

    func testXForwardedForRightMostUntrustedHop() throws {
        XCTAssertEqual(try client(xff: ["198.51.100.7, 203.0.113.5, 10.0.0.2, 10.0.0.3"]), try address("203.0.113.5"))
        XCTAssertEqual(try client(xff: ["203.0.113.5,10.0.0.2"]), try address("203.0.113.5"))
        XCTAssertEqual(try client(xff: ["198.51.100.7"]), try address("198.51.100.7"))
        XCTAssertEqual(try client(xff: ["2001:db8::5, 2001:db8:ffff::1"]), try address("2001:db8::5"))
        XCTAssertEqual(try client(xff: ["::ffff:198.51.100.7"]), try address("198.51.100.7"))
        // A trusted peer by its mapped form.
        XCTAssertEqual(
            proxies.forwardedClient(peer: try address("::ffff:10.0.0.1"), forwarded: [], xForwardedFor: ["198.51.100.7"]),
            try address("198.51.100.7"))
    }

    func testXForwardedForEntryForms() throws {
        XCTAssertEqual(try client(xff: ["  [2001:db8::5]:443 , \t198.51.100.7:8080 "]), try address("198.51.100.7"))
        XCTAssertEqual(try client(xff: ["[2001:db8::5]:443"]), try address("2001:db8::5"))
        XCTAssertEqual(try client(xff: ["[2001:db8::5]"]), try address("2001:db8::5"))
        XCTAssertEqual(try client(xff: ["198.51.100.7:1"]), try address("198.51.100.7"))
        XCTAssertEqual(try client(xff: ["198.51.100.7, , 10.0.0.4,"]), try address("198.51.100.7"))
    }

    func testXForwardedForFieldValuesInOrder() throws {
        XCTAssertEqual(try client(xff: ["203.0.113.1", "198.51.100.2, 10.0.0.5"]), try address("198.51.100.2"))
        XCTAssertEqual(try client(xff: ["198.51.100.2, 10.0.0.5", "203.0.113.1"]), try address("203.0.113.1"))
        XCTAssertEqual(try client(xff: ["198.51.100.2", "10.0.0.5", "10.0.0.6"]), try address("198.51.100.2"))
        // What a client wrote to the left of the address its proxy appended is never read.
        XCTAssertEqual(try client(xff: ["garbage, [::1, 198.51.100.9"]), try address("198.51.100.9"))
    }

    func testMalformedXForwardedForMeansThePeer() throws {
        for values in [
            ["198.51.100.1, not-an-ip"], ["unknown"], ["198.51.100.1:99999x"], ["198.51.100.1:123456"],
            ["198.51.100.1:"], ["[2001:db8::1"], ["[2001:db8::1]80"], ["[198.51.100.1]"], ["2001:db8::1%eth0"],
            ["198.51.100.1 10.0.0.1"], ["198.51.100.1", "garbage", "10.0.0.2"], ["_hidden"],
        ] {
            XCTAssertNil(try client(xff: values), "\(values)")
        }
    }

    func testForwardedIsPreferredOverXForwardedFor() throws {
        XCTAssertEqual(try client(forwarded: ["for=192.0.2.43"], xff: ["198.51.100.1"]), try address("192.0.2.43"))
        // A malformed Forwarded does not fall back to X-Forwarded-For.
        XCTAssertNil(try client(forwarded: ["for=[2001:db8::1]"], xff: ["198.51.100.1"]))
    }

    func testForwardedNodeForms() throws {
        XCTAssertEqual(try client(forwarded: [#"for="[2001:db8:cafe::17]:4711""#]), try address("2001:db8:cafe::17"))
        XCTAssertEqual(try client(forwarded: [#"for="[2001:db8:cafe::17]""#]), try address("2001:db8:cafe::17"))
        XCTAssertEqual(try client(forwarded: [#"for="192.0.2.43:47011""#]), try address("192.0.2.43"))
        XCTAssertEqual(try client(forwarded: [#"for="192.0.2.43:_port""#]), try address("192.0.2.43"))
        XCTAssertEqual(try client(forwarded: [#"for="192.0.2.43""#]), try address("192.0.2.43"))
        XCTAssertEqual(try client(forwarded: [#"For="192.0.2.43:47011";proto=https;BY=203.0.113.43"#]), try address("192.0.2.43"))
        XCTAssertEqual(try client(forwarded: ["proto=http; for=192.0.2.60 ;by=10.0.0.1"]), try address("192.0.2.60"))
        XCTAssertEqual(try client(forwarded: [#"for="\[2001:db8::1\]:\80""#]), try address("2001:db8::1"))
    }

    func testForwardedElementsAndFieldValuesInOrder() throws {
        XCTAssertEqual(
            try client(forwarded: ["for=192.0.2.43, for=198.51.100.17;by=10.0.0.1", "for=10.0.0.9"]),
            try address("198.51.100.17"))
        XCTAssertEqual(try client(forwarded: ["for=198.51.100.17", "for=192.0.2.43"]), try address("192.0.2.43"))
        XCTAssertEqual(try client(forwarded: ["for=192.0.2.43", "for=198.51.100.17"]), try address("198.51.100.17"))
        XCTAssertEqual(try client(forwarded: [#"for=192.0.2.1;note="a,b;c=d", for=198.51.100.3"#]), try address("198.51.100.3"))
        XCTAssertEqual(try client(forwarded: [#"for=198.51.100.3, for=192.0.2.1;note="x, for=203.0.113.1""#]), try address("192.0.2.1"))
        XCTAssertEqual(try client(forwarded: ["for=192.0.2.43,, for=10.0.0.2 ,"]), try address("192.0.2.43"))
    }

    func testUnknownOrObfuscatedClientMeansThePeer() throws {
        XCTAssertNil(try client(forwarded: ["for=192.0.2.43, for=unknown"]))
        XCTAssertNil(try client(forwarded: ["for=192.0.2.43, for=UNKNOWN, for=10.0.0.2"]))
        XCTAssertNil(try client(forwarded: ["for=192.0.2.43, for=_hidden, for=10.0.0.2"]))
        XCTAssertNil(try client(forwarded: [#"for="_gazonk:_p1""#]))
        XCTAssertNil(try client(forwarded: [#"for="unknown:8080""#]))
        XCTAssertNil(try client(forwarded: ["for=192.0.2.43, proto=https"]))  // an element without for=
        // A hidden hop beyond the client does not matter.
        XCTAssertEqual(try client(forwarded: ["for=unknown, for=192.0.2.43, for=10.0.0.2"]), try address("192.0.2.43"))
    }

    func testMalformedForwardedMeansThePeer() throws {
        for values in [
            ["for=[2001:db8::1]"], [#"for="2001:db8::1""#], ["for=192.0.2.43:80"], ["for"], ["for="], [#"for="""#],
            [#"for="192.0.2.1"#], ["for=192.0.2.1;for=198.51.100.1"], ["for=999.0.0.1"], ["for=192.0.2.1 x"],
            ["for = 192.0.2.1"], ["=192.0.2.1"], ["for=bogus!"], [#"for="192.0.2.1:port""#], [#"for="[::1]:""#],
            [#"for="[::1]:123456""#], [#"for="_""#], [#"for="_a b""#], ["for=198.51.100.1", "for=bogus!"],
            ["for=192.0.2.1\u{1}"], ["for=\"192.0.2.1\u{7F}\""], ["for=192.0.2.1;by"],
        ] {
            XCTAssertNil(try client(forwarded: values), "\(values)")
        }
    }

    func testAllTrustedHopsGiveTheLeftMost() throws {
        XCTAssertEqual(try client(xff: ["10.0.0.7, 10.0.0.8"]), try address("10.0.0.7"))
        XCTAssertEqual(try client(forwarded: [#"for=10.1.1.1, for="[2001:db8:ffff::1]""#]), try address("10.1.1.1"))
    }

    func testNoHopsMeansThePeer() throws {
        XCTAssertNil(try client())
        XCTAssertNil(try client(xff: [" , "]))
        XCTAssertNil(try client(xff: [""]))
        XCTAssertNil(try client(forwarded: [""], xff: ["198.51.100.1"]))
    }

    func testHopAndSizeLimits() throws {
        // Six untrusted hops beyond the right-most 64, all trusted: the left-most considered.
        let hops = Array(repeating: "198.51.100.1", count: 6) + (0..<64).map { "10.0.0.\($0)" }
        XCTAssertEqual(try client(xff: [hops.joined(separator: ", ")]), try address("10.0.0.0"))
        XCTAssertEqual(try client(xff: [hops.dropLast().joined(separator: ", ")]), try address("198.51.100.1"))

        let long = String(repeating: "10.0.0.1, ", count: 818) + "198.51.100.1"  // 8,192 bytes
        XCTAssertEqual(long.utf8.count, 8192)
        XCTAssertEqual(try client(xff: [long]), try address("198.51.100.1"))
        XCTAssertNil(try client(xff: [long + " "]))
        XCTAssertNil(try client(xff: [long, "10.0.0.1"]))
    }

    // MARK: PROXY protocol v2

    func testProxyV2IPv4() {
        let block: [UInt8] = [192, 0, 2, 1, 198, 51, 100, 2, 0x1F, 0x90, 0x01, 0xBB] + [0x04, 0x00, 0x00]  // a NOOP TLV
        let header = proxyV2(command: 0x1, family: 0x11, block: block)
        XCTAssertEqual(header.count, 31)
        XCTAssertEqual(parse(header), .header(length: 31, source: IPAddress("192.0.2.1")))
        XCTAssertEqual(parse(header + Array("GET / HTTP/1.1\r\n".utf8)), .header(length: 31, source: IPAddress("192.0.2.1")))
        XCTAssertEqual(
            parse(proxyV2(command: 0x1, family: 0x12, block: Array(block.prefix(12)))),
            .header(length: 28, source: IPAddress("192.0.2.1")))  // UDP
    }

    func testProxyV2IPv6() throws {
        let source = try address("2001:db8::1").bytes, destination = try address("2001:db8::2").bytes
        let header = proxyV2(command: 0x1, family: 0x21, block: source + destination + [0x1F, 0x90, 0x01, 0xBB])
        XCTAssertEqual(parse(header), .header(length: 52, source: try address("2001:db8::1")))

        let mapped = proxyV2(command: 0x1, family: 0x21, block: IPAddress.mappedPrefix + [192, 0, 2, 9] + destination + [0, 1, 0, 2])
        XCTAssertEqual(parse(mapped), .header(length: 52, source: try address("192.0.2.9")))
    }

    func testProxyV2WithoutSource() {
        XCTAssertEqual(parse(proxyV2(command: 0x0, family: 0x00, block: [])), .header(length: 16, source: nil))
        XCTAssertEqual(
            parse(proxyV2(command: 0x0, family: 0x11, block: [192, 0, 2, 1, 198, 51, 100, 2, 0, 1, 0, 2])),
            .header(length: 28, source: nil))  // LOCAL ignores the address block
        XCTAssertEqual(parse(proxyV2(command: 0x0, family: 0xFF, block: [])), .header(length: 16, source: nil))
        XCTAssertEqual(parse(proxyV2(command: 0x1, family: 0x00, block: [])), .header(length: 16, source: nil))
        XCTAssertEqual(
            parse(proxyV2(command: 0x1, family: 0x31, block: [UInt8](repeating: 0, count: 216))),
            .header(length: 232, source: nil))
    }

    func testProxyV2NeedsMore() {
        let header = proxyV2(command: 0x1, family: 0x11, block: [192, 0, 2, 1, 198, 51, 100, 2, 0, 1, 0, 2])
        for count in 0..<header.count {
            XCTAssertEqual(parse(Array(header.prefix(count))), .needMore, "\(count) bytes")
        }
        let large = proxyV2(command: 0x1, family: 0x11, block: [UInt8](repeating: 1, count: 2048))
        XCTAssertEqual(parse(Array(large.prefix(16))), .needMore)
        XCTAssertEqual(parse(large), .header(length: 2064, source: IPAddress("1.1.1.1")))
    }

    func testProxyV2BadSignature() {
        let header = proxyV2(command: 0x1, family: 0x11, block: [UInt8](repeating: 1, count: 12))
        for index in 0..<12 {
            var changed = header
            changed[index] ^= 0x20
            XCTAssertEqual(parse(changed), .invalid, "byte \(index)")
            XCTAssertEqual(parse(Array(changed.prefix(index + 1))), .invalid, "prefix through byte \(index)")
        }
        XCTAssertEqual(parse(Array("GET / HTTP/1.1\r\n".utf8)), .invalid)
        XCTAssertEqual(parse(Array("PROXY TCP4 192.0.2.1 192.0.2.2 1 2\r\n".utf8)), .invalid)  // version 1
        XCTAssertEqual(parse(Array("\r\n\r\nX".utf8)), .invalid)
    }

    func testProxyV2BadVersionOrCommand() {
        for byte: UInt8 in [0x11, 0x31, 0x01, 0xF1, 0x22, 0x2F] {
            var header = proxyV2(command: 0x1, family: 0x11, block: [UInt8](repeating: 1, count: 12))
            header[12] = byte
            XCTAssertEqual(parse(header), .invalid, "0x\(String(byte, radix: 16))")
            XCTAssertEqual(parse(Array(header.prefix(13))), .invalid, "0x\(String(byte, radix: 16)), 13 bytes")
        }
    }

    func testProxyV2BadLengthOrFamily() {
        let oversize = proxyV2(command: 0x1, family: 0x11, block: [UInt8](repeating: 1, count: 2049))
        XCTAssertEqual(parse(Array(oversize.prefix(16))), .invalid)
        XCTAssertEqual(parse(oversize), .invalid)
        XCTAssertEqual(parse(proxyV2(command: 0x0, family: 0x00, block: [UInt8](repeating: 0, count: 0xFFFF))), .invalid)
        XCTAssertEqual(parse(proxyV2(command: 0x1, family: 0x11, block: [UInt8](repeating: 1, count: 11))), .invalid)
        XCTAssertEqual(parse(proxyV2(command: 0x1, family: 0x21, block: [UInt8](repeating: 1, count: 12))), .invalid)
        XCTAssertEqual(parse(proxyV2(command: 0x1, family: 0x31, block: [UInt8](repeating: 1, count: 36))), .invalid)
        XCTAssertEqual(parse(proxyV2(command: 0x1, family: 0x41, block: [UInt8](repeating: 1, count: 36))), .invalid)
        XCTAssertEqual(parse(proxyV2(command: 0x1, family: 0x13, block: [UInt8](repeating: 1, count: 12))), .invalid)
    }

    // MARK: Helpers

    private func address(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> IPAddress {
        try XCTUnwrap(IPAddress(text), "not an address: \(text)", file: file, line: line)
    }

    private func network(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> IPNetwork {
        try XCTUnwrap(IPNetwork(text), "not a network: \(text)", file: file, line: line)
    }

    private func parseError(_ list: String) -> TrustedProxies.ParseError? {
        guard case .failure(let error) = TrustedProxies.parse(list) else { return nil }
        return error
    }

    /// The client a trusted proxy at 10.0.0.1 forwards for.
    private func client(forwarded: [String] = [], xff: [String] = []) throws -> IPAddress? {
        proxies.forwardedClient(peer: try address("10.0.0.1"), forwarded: forwarded, xForwardedFor: xff)
    }

    /// A version 2 header: the signature, version 2 with `command`, `family`, the block's length and the block.
    private func proxyV2(command: UInt8, family: UInt8, block: [UInt8]) -> [UInt8] {
        ProxyProtocol.signature + [
            0x20 | command, family, UInt8(truncatingIfNeeded: block.count >> 8),
            UInt8(truncatingIfNeeded: block.count),
        ] + block
    }

    private func parse(_ bytes: [UInt8]) -> ProxyProtocol.V2Result {
        bytes.withUnsafeBytes { ProxyProtocol.parseV2($0) }
    }
}
