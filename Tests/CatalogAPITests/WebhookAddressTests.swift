import CatalogOutbound
import Testing

/// The address policy on its own: no connection is made, whatever it decides.
@Suite struct WebhookAddressTests {
    typealias Class = AddressPolicy.AddressClass

    static let cases: [(String, Class)] = [
        ("93.184.215.14", .global), ("8.8.8.8", .global), ("2606:4700:4700::1111", .global), ("::ffff:8.8.8.8", .global), ("64:ff9b::808:808", .global),
        ("127.0.0.1", .loopback), ("127.255.255.254", .loopback), ("::1", .loopback), ("::ffff:127.0.0.1", .loopback), ("64:ff9b::7f00:1", .loopback),
        ("0.0.0.0", .unspecified), ("0.1.2.3", .unspecified), ("::", .unspecified),
        ("10.0.0.1", .private), ("172.16.0.1", .private), ("172.31.255.255", .private), ("192.168.1.1", .private), ("fec0::1", .private),
        ("64:ff9b:1::a00:1", .private),
        ("100.64.0.1", .sharedAddressSpace), ("100.127.255.254", .sharedAddressSpace),
        ("169.254.0.1", .linkLocal), ("fe80::1", .linkLocal), ("febf::1", .linkLocal),
        ("fc00::1", .uniqueLocal), ("fd12:3456::1", .uniqueLocal),
        ("224.0.0.1", .multicast), ("239.255.255.250", .multicast), ("255.255.255.255", .multicast), ("ff02::1", .multicast),
        ("169.254.169.254", .metadata), ("::ffff:169.254.169.254", .metadata), ("168.63.129.16", .metadata), ("100.100.100.200", .metadata),
        ("192.0.0.192", .metadata), ("fd00:ec2::254", .metadata),
        ("192.0.2.1", .documentation), ("198.51.100.1", .documentation), ("203.0.113.1", .documentation), ("198.18.0.1", .documentation),
        ("2001:db8::1", .documentation), ("3fff::1", .documentation),
        ("192.0.0.8", .reserved), ("240.0.0.1", .reserved), ("192.88.99.1", .reserved), ("2001::1", .reserved), ("2002:a00:1::1", .reserved),
        ("::10.0.0.1", .reserved), ("100::1", .reserved), ("4000::1", .reserved),
    ]

    @Test(arguments: cases) func everyAddressHasItsClass(_ text: String, _ expected: Class) throws {
        let address = try #require(IPAddress(text))
        #expect(AddressPolicy.classify(address) == expected, "\(text)")
        let refusal = AddressPolicy().refusal(address, plainHTTP: false)
        #expect((refusal == nil) == (expected == .global), "\(text): \(refusal ?? "allowed")")
        if let refusal { #expect(refusal.contains(expected.rawValue)) }
    }

    @Test func allowedNetworksOpenRefusedClassesAndHTTPNeedsItsOwn() throws {
        let policy = AddressPolicy(allowed: try IPNetwork.list("127.0.0.1/32, 10.0.0.0/8"), plainHTTP: try IPNetwork.list("127.0.0.0/8"))
        #expect(policy.refusal(try #require(IPAddress("127.0.0.1")), plainHTTP: false) == nil)
        #expect(policy.refusal(try #require(IPAddress("::ffff:127.0.0.1")), plainHTTP: false) == nil)
        #expect(policy.refusal(try #require(IPAddress("127.0.0.2")), plainHTTP: false)?.contains("loopback") == true)
        #expect(policy.refusal(try #require(IPAddress("127.0.0.1")), plainHTTP: true) == nil)
        #expect(policy.refusal(try #require(IPAddress("10.9.8.7")), plainHTTP: false) == nil)
        #expect(policy.refusal(try #require(IPAddress("10.9.8.7")), plainHTTP: true)?.contains("plain http") == true)
        #expect(policy.refusal(try #require(IPAddress("8.8.8.8")), plainHTTP: true)?.contains("plain http") == true)
        #expect(policy.refusal(try #require(IPAddress("169.254.169.254")), plainHTTP: false)?.contains("metadata") == true)
    }

    @Test func networksAreReadStrictly() {
        for bad in ["10.0.0.1/33", "10.0.0.1/8", "10.0.0.0/-1", "fd00::/129", "example.com/8", "10.0.0.0/ 8", "", "10.0.0.0/٨"] {
            #expect(IPNetwork(bad) == nil, "\(bad)")
        }
        #expect(IPNetwork("10.0.0.0/8")?.contains(IPAddress("10.255.0.1")!) == true)
        #expect(IPNetwork("10.0.0.0/8")?.contains(IPAddress("11.0.0.1")!) == false)
        #expect(IPNetwork("fd00::/8")?.contains(IPAddress("fdff::1")!) == true)
        #expect(IPNetwork("127.0.0.1")?.description == "127.0.0.1/32")
        #expect((try? IPNetwork.list("10.0.0.0/8,nope")) == nil)
    }
}
