extension ResourceSchema {
    /// Every resource, in the order an export lists them (and an import needs them):
    /// what a playlist or comment refers to comes before it.
    package static let all: [ResourceSchema] = [.game, .location, .playableItem, .playlist, .comment]
}
