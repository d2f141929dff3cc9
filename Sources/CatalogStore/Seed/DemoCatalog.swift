import CatalogModels
import CatalogSchema
import Foundation

/// The demo catalog loaded into an empty database: the games, countries and videos of
/// the iOS examples this service grew out of.
public enum DemoCatalog {
    /// Four classic arcade games.
    public static let games: [GameInput] = [
        GameInput(
            name: "Space Invaders",
            description:
                "A fixed shooter designed by Tomohiro Nishikado and released by Taito in 1978. The player moves a laser cannon along the bottom of the screen and shoots at rows of aliens that march back and forth and step closer with every pass, speeding up as their numbers fall. Its success started the golden age of arcade video games.",
            imageName: "space-invaders"),
        GameInput(
            name: "Discs of Tron",
            description:
                "A 1983 Bally Midway arcade game based on the film Tron. Standing on floating platforms inside a three-dimensional arena, the player throws energy discs at the warrior Sark, deflects his shots and tries to knock him off his platform. Its cabinet used a spinner to aim the throw and a joystick to move and jump.",
            imageName: "discs-of-tron"),
        GameInput(
            name: "Frogger",
            description:
                "An action game developed by Konami and released in 1981. The player guides frogs one at a time across a busy road and then a river full of floating logs, turtles and alligators to reach the five homes at the top of the screen, before time runs out.",
            imageName: "frogger"),
        GameInput(
            name: "Joust",
            description:
                "A 1982 Williams Electronics arcade game in which players ride flying ostriches (the second player a stork) and defeat enemy knights mounted on buzzards by colliding with them from a greater height. Defeated knights leave eggs that hatch into new enemies unless they are collected in time.",
            imageName: "joust"),
    ]

    /// Countries at the geographic centres commonly used for them (Google's country dataset).
    public static let locations: [LocationInput] = [
        LocationInput(name: "Argentina", countryCode: "AR", latitude: -38.416097, longitude: -63.616672),
        LocationInput(name: "Australia", countryCode: "AU", latitude: -25.274398, longitude: 133.775136),
        LocationInput(name: "Brazil", countryCode: "BR", latitude: -14.235004, longitude: -51.92528),
        LocationInput(name: "Canada", countryCode: "CA", latitude: 56.130366, longitude: -106.346771),
        LocationInput(name: "China", countryCode: "CN", latitude: 35.86166, longitude: 104.195397),
        LocationInput(name: "Egypt", countryCode: "EG", latitude: 26.820553, longitude: 30.802498),
        LocationInput(name: "France", countryCode: "FR", latitude: 46.227638, longitude: 2.213749),
        LocationInput(name: "Germany", countryCode: "DE", latitude: 51.165691, longitude: 10.451526),
        LocationInput(name: "Greece", countryCode: "GR", latitude: 39.074208, longitude: 21.824312),
        LocationInput(name: "India", countryCode: "IN", latitude: 20.593684, longitude: 78.96288),
        LocationInput(name: "Ireland", countryCode: "IE", latitude: 53.41291, longitude: -8.24389),
        LocationInput(name: "Italy", countryCode: "IT", latitude: 41.87194, longitude: 12.56738),
        LocationInput(name: "Japan", countryCode: "JP", latitude: 36.204824, longitude: 138.252924),
        LocationInput(name: "Kenya", countryCode: "KE", latitude: -0.023559, longitude: 37.906193),
        LocationInput(name: "Mexico", countryCode: "MX", latitude: 23.634501, longitude: -102.552784),
        LocationInput(name: "Netherlands", countryCode: "NL", latitude: 52.132633, longitude: 5.291266),
        LocationInput(name: "New Zealand", countryCode: "NZ", latitude: -40.900557, longitude: 174.885971),
        LocationInput(name: "Nigeria", countryCode: "NG", latitude: 9.081999, longitude: 8.675277),
        LocationInput(name: "Norway", countryCode: "NO", latitude: 60.472024, longitude: 8.468946),
        LocationInput(name: "Portugal", countryCode: "PT", latitude: 39.399872, longitude: -8.224454),
        LocationInput(name: "South Africa", countryCode: "ZA", latitude: -30.559482, longitude: 22.937506),
        LocationInput(name: "South Korea", countryCode: "KR", latitude: 35.907757, longitude: 127.766922),
        LocationInput(name: "Spain", countryCode: "ES", latitude: 40.463667, longitude: -3.74922),
        LocationInput(name: "Sweden", countryCode: "SE", latitude: 60.128161, longitude: 18.643501),
        LocationInput(name: "Switzerland", countryCode: "CH", latitude: 46.818188, longitude: 8.227512),
        LocationInput(name: "Thailand", countryCode: "TH", latitude: 15.870032, longitude: 100.992541),
        LocationInput(name: "United Kingdom", countryCode: "GB", latitude: 55.378051, longitude: -3.435973),
        LocationInput(name: "United States", countryCode: "US", latitude: 37.09024, longitude: -95.712891),
    ]

    private static let samples = "https://storage.googleapis.com/gtv-videos-bucket/sample/"
    private static let apple = "https://devstreaming-cdn.apple.com/videos/streaming/examples/"

    private static func item(_ title: String, _ description: String, _ stream: String, _ thumbnail: String?, _ duration: Double?) -> PlayableItemInput? {
        URL(string: stream).map {
            PlayableItemInput(title: title, description: description, streamURL: $0, thumbnailURL: thumbnail.flatMap(URL.init(string:)), durationSeconds: duration)
        }
    }

    /// Public sample videos: HLS examples from Apple, open movies from the Blender Foundation.
    public static let items: [PlayableItemInput] =
        ([
            item(
                "Big Buck Bunny",
                "A large and lovable rabbit deals with three tiny bullies, led by a flying squirrel, who are determined to squelch his happiness. An open movie from the Blender Institute.",
                samples + "BigBuckBunny.mp4", samples + "images/BigBuckBunny.jpg", 596),
            item(
                "Elephants Dream", "The first Blender open movie, from 2006: two strange characters explore a capricious and seemingly infinite machine.",
                samples + "ElephantsDream.mp4", samples + "images/ElephantsDream.jpg", 653),
            item(
                "For Bigger Blazes", "HBO GO now works with Chromecast -- the easiest way to enjoy online video on your TV.", samples + "ForBiggerBlazes.mp4",
                samples + "images/ForBiggerBlazes.jpg", 15),
            item(
                "For Bigger Escapes", "Introducing Chromecast. The easiest way to enjoy online video and music on your TV, for when Batman's escapes aren't quite big enough.",
                samples + "ForBiggerEscapes.mp4", samples + "images/ForBiggerEscapes.jpg", 15),
            item(
                "For Bigger Fun", "Introducing Chromecast. The easiest way to enjoy online video and music on your TV.", samples + "ForBiggerFun.mp4",
                samples + "images/ForBiggerFun.jpg", 60),
            item(
                "For Bigger Joyrides", "Introducing Chromecast. The easiest way to enjoy online video and music on your TV, for the times that call for bigger joyrides.",
                samples + "ForBiggerJoyrides.mp4", samples + "images/ForBiggerJoyrides.jpg", 15),
            item(
                "For Bigger Meltdowns",
                "Introducing Chromecast. The easiest way to enjoy online video and music on your TV, for when you want to make Buster's big meltdowns even bigger.",
                samples + "ForBiggerMeltdowns.mp4", samples + "images/ForBiggerMeltdowns.jpg", 15),
            item(
                "Sintel",
                "Sintel is an independently produced short film, initiated by the Blender Foundation as a means to further improve and validate the free/open source 3D creation suite Blender.",
                samples + "Sintel.mp4", samples + "images/Sintel.jpg", 888),
            item(
                "Tears of Steel",
                "Tears of Steel was realized with crowd-funding by users of the open source 3D creation tool Blender, to improve and test a complete open and free pipeline for visual effects in film.",
                samples + "TearsOfSteel.mp4", samples + "images/TearsOfSteel.jpg", 734),
            item(
                "BipBop Advanced (HLS, fMP4)", "Apple's advanced HTTP Live Streaming example: HEVC and H.264 variants in fragmented MP4, with alternate audio and subtitles.",
                apple + "img_bipbop_adv_example_fmp4/master.m3u8", nil, 1800),
            item("BipBop 16x9 (HLS)", "Apple's basic HTTP Live Streaming example in 16:9, with several bit rates.", apple + "bipbop_16x9/bipbop_16x9_variant.m3u8", nil, 1800),
            item("BipBop 4x3 (HLS)", "Apple's basic HTTP Live Streaming example in 4:3, with several bit rates.", apple + "bipbop_4x3/bipbop_4x3_variant.m3u8", nil, 1800),
        ] as [PlayableItemInput?]).compactMap { $0 }

    /// Two playlists, as titles, descriptions and the titles of their items in order.
    public static let playlists: [(input: PlaylistInput, itemTitles: [String])] = [
        (
            PlaylistInput(title: "Blender open movies", description: "The open films of the Blender Institute, oldest first."),
            ["Elephants Dream", "Big Buck Bunny", "Sintel", "Tears of Steel"]
        ),
        (
            PlaylistInput(title: "HLS test streams", description: "Apple's HTTP Live Streaming examples, for checking a player."),
            ["BipBop 4x3 (HLS)", "BipBop 16x9 (HLS)", "BipBop Advanced (HLS, fMP4)"]
        ),
    ]

    /// A short thread: comments on an item's title, each with its replies, by authors
    /// without accounts (as comments from before accounts are).
    public static let comments: [(itemTitle: String, comment: (author: String, input: CommentInput), replies: [(author: String, input: CommentInput)])] = [
        (
            "Big Buck Bunny", ("Ana", CommentInput(body: "Still the best test video for a new player.")),
            [("Ben", CommentInput(body: "And the bunny holds up at every bit rate."))]
        ),
        ("Sintel", ("Chloé", CommentInput(body: "The ending gets me every time.")), []),
    ]
}

extension CatalogStore {
    /// Loads ``DemoCatalog`` into a new, empty catalog, once in the database's life: a
    /// catalog emptied later stays empty. Every resource goes through its declaration's
    /// reader and rules, as a request body would. Servers starting at once on one database
    /// seed it once: the marker's insertion decides, and waits for any other in progress.
    /// - Returns: whether it did.
    @discardableResult
    public func seedDemoCatalogIfEmpty() throws -> Bool {
        try database.write(atomic: true) { [self] db -> Bool in
            let marker = "demoCatalogOffered"
            guard
                try db.execute(
                    "INSERT INTO catalog_metadata (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING",
                    [marker, Timestamp.string(from: Date())]) == 1
            else { return false }
            let existing =
                try db.fetchValue(
                    """
                    SELECT (SELECT count(*) FROM playable_items) + (SELECT count(*) FROM games) + (SELECT count(*) FROM locations)
                         + (SELECT count(*) FROM playlists)
                    """
                ).int ?? 0
            guard existing == 0 else { return false }
            // Distinct, increasing creation times keep the demo's order stable.
            var clock = Timestamp.milliseconds(Date()) - 60_000
            func insert(_ store: ResourceStore, _ input: some Encodable) throws -> CatalogID {
                clock += 1
                return try store.insert(db, readValues(input, store.schema.creation).get(), at: clock).id
            }
            for game in DemoCatalog.games { _ = try insert(games, game) }
            for location in DemoCatalog.locations { _ = try insert(locations, location) }
            var itemIDs: [String: CatalogID] = [:]
            for item in DemoCatalog.items { itemIDs[item.title] = try insert(items, item) }
            let playlistIDs = try DemoCatalog.playlists.map { try insert(playlists, $0.input) }
            for (id, playlist) in zip(playlistIDs, DemoCatalog.playlists) {
                let entries = playlist.itemTitles.compactMap { itemIDs[$0] }
                for (position, itemID) in entries.enumerated() {
                    clock += 1
                    try db.execute(
                        """
                        INSERT INTO playlist_entries (id, playlist_pk, item_pk, sort_key, created_at)
                        SELECT CAST(? AS TEXT), (SELECT pk FROM playlists WHERE id = ?), pk, CAST(? AS BIGINT), CAST(? AS BIGINT) FROM playable_items WHERE id = ?
                        """, [CatalogID().rawValue, id.rawValue, Int64(position + 1) * EntryOrder.spacing, clock, itemID.rawValue])
                }
                try db.execute("UPDATE playlists SET entry_count = ? WHERE id = ?", [entries.count, id.rawValue])
            }
            for thread in DemoCatalog.comments {
                guard let itemID = itemIDs[thread.itemTitle] else { continue }
                func post(_ comment: (author: String, input: CommentInput)) throws -> CatalogID {
                    clock += 1
                    return try comments.insert(
                        db, readValues(comment.input, ResourceSchema.comment.creation).get(), on: itemID,
                        writer: (nil, comment.author), at: clock, countsReply: false
                    ).id
                }
                let parent = try post(thread.comment)
                for var reply in thread.replies {
                    reply.input.parentId = parent
                    _ = try post(reply)
                }
                try db.execute("UPDATE comments SET reply_count = ? WHERE id = ?", [thread.replies.count, parent.rawValue])
            }
            return true
        }
    }
}
